package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/internal/flagvalues"
)

// --format text|json for the commands whose output a script may parse:
// text for people (and line-oriented tools), json one value on one line.

func formatFlag() cli.Flag {
	return flagvalues.With(&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "text", Usage: "text or json"}, flagvalues.List(outputFormats))
}

// outputFormats are --format's values where it is text or json.
var outputFormats = []string{"text", "json"}

// wantJSON reads --format: true for json, false for text, a usage error
// for anything else (checked before any output).
func wantJSON(c *cli.Context) (bool, error) {
	f := c.String("format")
	if !slices.Contains(outputFormats, f) {
		return false, usagef("invalid --format %q: want %s", f, strings.Join(outputFormats, " or "))
	}
	return f == "json", nil
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
