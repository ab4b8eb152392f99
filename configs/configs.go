// Package configs ships gotrain's DeepSpeed configs inside the binary: the
// default used when `gotrain train` gets no --config, and the ZeRO examples
// named like the files in DeepSpeed setup guides.
package configs

import "embed"

// Files holds every *.json in this directory.
//
//go:embed *.json
var Files embed.FS

// Default is the config `gotrain train` uses without --config.
const Default = "tiny_cpu.json"
