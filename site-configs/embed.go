// Package siteconfigs holds the site profiles built into batchkit. Each
// NAME.toml here is the profile NAME, found after any of the same name in
// $BATCHKIT_PROFILE_PATH, the user's and the system's profile directories.
// README.md documents the schema.
package siteconfigs

import "embed"

// FS holds the profiles, NAME.toml at its root.
//
//go:embed *.toml
var FS embed.FS
