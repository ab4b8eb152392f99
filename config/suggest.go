package config

import "github.com/gotrain/gotrain/internal/didyoumean"

// suggest returns the known key closest to key, or "" when none is a
// plausible typo (didyoumean.Suggest).
func suggest(key string, candidates []string) string { return didyoumean.Suggest(key, candidates) }

// closest returns the known key nearest to key, however far: warnings about
// keys that are no typo still point at the nearest key gotrain knows.
func closest(key string, candidates []string) string { return didyoumean.Nearest(key, candidates) }
