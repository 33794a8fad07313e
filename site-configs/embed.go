// Package siteconfigs is data, not code: the folder site-configs/ holds the
// site profiles built into batchkit (NAME.toml is the profile NAME), kept at
// the top of the repository where site admins look for examples to copy.
// This file is the only Go here. It exists because go:embed reads only files
// inside its own package's directory, so the profiles cannot be embedded
// from profile/, which loads them (profile.Loader.Embedded). A profile of
// the same name in $BATCHKIT_PROFILE_PATH, the user's or the system's
// profile directory comes first; README.md here documents the schema.
package siteconfigs

import "embed"

// FS holds the profiles, NAME.toml at its root.
//
//go:embed *.toml
var FS embed.FS
