package envsetup

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/batchkit/batchkit/envvars"
)

// NewToken is a fresh job token for envvars.Token: 32 random bytes,
// hex-encoded.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating %s: %w", envvars.Token, err)
	}
	return hex.EncodeToString(b), nil
}

// LaunchToken is the job token a launch (batchkit run's first attempt,
// batchkit mpirun) hands its ranks: the user's, when environ has one (the
// user's value wins, and an outer launch's ranks keep theirs), else a new
// one from newToken. Of duplicates the last wins, as exec.Cmd passes it on.
func LaunchToken(environ []string, newToken func() (string, error)) (string, error) {
	if tok := Environ(environ)[envvars.Token]; tok != "" {
		return tok, nil
	}
	return newToken()
}
