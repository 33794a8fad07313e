package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

// --format text|json for the commands whose output a script may parse:
// text for people (and line-oriented tools), json one value on one line.

func formatFlag() cli.Flag {
	return &cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "text", Usage: "text or json"}
}

// wantJSON reads --format: true for json, false for text, a usage error
// for anything else (checked before any output).
func wantJSON(c *cli.Context) (bool, error) {
	switch f := c.String("format"); f {
	case "text":
		return false, nil
	case "json":
		return true, nil
	default:
		return false, usagef("invalid --format %q: want text or json", f)
	}
}

// jsonNoArgs is wantJSON for a command that takes no arguments.
func jsonNoArgs(c *cli.Context) (bool, error) {
	if c.NArg() > 0 {
		name := strings.TrimPrefix(c.Command.HelpName, c.App.Name+" ") // "profile list"
		return false, usagef("%s takes no arguments, got %q", name, c.Args().First())
	}
	return wantJSON(c)
}

// writeJSONLine writes v as JSON on one line.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
