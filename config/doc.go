// Package config reads the upgrade-agent YAML configuration file.
//
// It is for turning one file into a validated Config: strict keys, typed
// values, every problem reported with the file, line and key so a person can
// fix it without guessing. Relative paths in the file are taken relative to
// the file's own folder, so a config works from any working directory.
//
// It must not look at flags or the environment (the cmd package applies the
// precedence flag > environment > config file > default), must not create
// files or folders, and must never print secrets such as upgrade_token or
// client_api_secret: problems name keys and lines, not secret values.
package config
