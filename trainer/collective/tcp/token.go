package tcp

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/topology"
)

// secretFile is the per-user secret, under the user's config directory,
// from which job tokens are derived when no token was handed down.
const secretFile = "batchkit/job-secret"

// ResolveToken returns the token the TCP backend authenticates peers with:
//
//  1. $BATCHKIT_JOB_TOKEN (envvars.Token), when set;
//  2. for a world of one, "" (there are no peers);
//  3. with a job id (Slurm's, or the MPI launcher's), HMAC-SHA256 of the job
//     id (and an srun step's id: topology.RendezvousID) keyed with the
//     user's secret file ($XDG_CONFIG_HOME or $HOME/.config, then
//     batchkit/job-secret, mode 0600, created on first use). Every rank of the job derives the same token when the home
//     directory is shared across nodes, as it is on clusters; nobody without
//     the user's secret can.
func ResolveToken(getenv topology.Getenv, t topology.Topology) (string, error) {
	if tok := getenv(envvars.Token); tok != "" {
		return tok, nil
	}
	if t.WorldSize <= 1 {
		return "", nil
	}
	if t.JobID == "" {
		return "", fmt.Errorf("no job token: %s is unset and the launcher gave no job id to derive one from "+
			"(launch with batchkit run, batchkit mpirun or under Slurm, or export %s to every rank)", envvars.Token, envvars.Token)
	}
	dir, err := configDir(getenv)
	if err != nil {
		return "", err
	}
	secret, err := loadOrCreateSecret(filepath.Join(dir, secretFile))
	if err != nil {
		return "", err
	}
	// Per srun step, like MASTER_PORT: two steps of a job running at once
	// must not accept each other's ranks. (StepID is an srun step's only.)
	return deriveToken(secret, topology.RendezvousID(t.JobID, t.StepID)), nil
}

// deriveToken is the token of job id under a user's secret.
func deriveToken(secret []byte, jobID string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("batchkit job token v1\x00"))
	m.Write([]byte(jobID))
	return hex.EncodeToString(m.Sum(nil))
}

func configDir(getenv topology.Getenv) (string, error) {
	if d := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		return d, nil
	}
	if h := getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".config"), nil
	}
	return "", fmt.Errorf("no job token: %s is unset and neither $XDG_CONFIG_HOME nor $HOME is an absolute path to keep the job secret in", envvars.Token)
}

// loadOrCreateSecret reads the secret file, creating it atomically (several
// ranks on several nodes may race to create it on a shared home): the new
// secret is written to a private temporary file and hard-linked into place,
// which fails if another rank won, in which case the winner's is read.
func loadOrCreateSecret(path string) ([]byte, error) {
	secret, err := readSecret(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return secret, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating job secret: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("creating job secret: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".job-secret-*")
	if err != nil {
		return nil, fmt.Errorf("creating job secret: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(hex.EncodeToString(raw) + "\n")
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, fmt.Errorf("creating job secret %s: %w", path, werr)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("creating job secret %s: %w", path, err)
	}
	secret, err = readSecret(path)
	if errors.Is(err, fs.ErrNotExist) {
		// Only a link to nothing both exists (for link(2)) and does not
		// (for stat(2)).
		if target, lerr := os.Readlink(path); lerr == nil {
			return nil, fmt.Errorf("job secret %s is a symbolic link to %s, which does not exist: remove the link, or create what it points to", path, target)
		}
		return nil, fmt.Errorf("reading job secret: %w", err)
	}
	return secret, err
}

// readSecret insists the file is private: a secret others can read would let
// them join (or disrupt) the user's jobs.
func readSecret(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("job secret %s is accessible by other users (mode %04o): run chmod 600 %s", path, perm, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return nil, fmt.Errorf("job secret %s belongs to uid %d, not to you (uid %d)", path, st.Uid, os.Getuid())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading job secret: %w", err)
	}
	s, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(s) < 16 {
		return nil, fmt.Errorf("job secret %s is not 16 or more hex-encoded bytes: delete it and a new one is created", path)
	}
	return s, nil
}
