package inittrace

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// FloorSource is a hello-world that links, with blank imports, what
// upgrade-agent depends on and keeps in its binary: net/http, crypto/tls
// and encoding/json for the clients, cobra for the commands, go-openai,
// YAML, the PostgreSQL driver, gonum's statistics and the OpenTelemetry
// trace API. Every package init of those runs and nothing else does: the
// start-up no change to this module's own code can go below. Keep the list
// in step with go.mod's direct requirements that the binary links.
const FloorSource = `package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"

	_ "github.com/jackc/pgx/v5"
	_ "github.com/sashabaranov/go-openai"
	_ "github.com/spf13/cobra"
	_ "go.opentelemetry.io/otel/attribute"
	_ "go.opentelemetry.io/otel/propagation"
	_ "go.opentelemetry.io/otel/trace"
	_ "go.yaml.in/yaml/v3"
	_ "gonum.org/v1/gonum/stat"
	_ "gonum.org/v1/gonum/stat/distuv"
)

var _, _, _ = http.Get, json.Marshal, tls.Client

func main() { fmt.Println("hello") }
`

// ChosenFloorSource is a hello-world that links net/http, crypto/tls and
// encoding/json, as any HTTPS and JSON client must, and, with blank
// imports, only the libraries the brief chose (spec/cli.md): cobra for the
// commands, go-openai for the LLM, yaml v3 for YAML. (The brief names
// tablewriter too; the binary draws its tables itself and does not link
// it.) Its start-up is the one no binary built on those choices can go
// below on a machine, whatever the rest of it does; FloorSource adds what
// this module chose itself (pgx, gonum, the OTel trace API).
const ChosenFloorSource = `package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"

	_ "github.com/sashabaranov/go-openai"
	_ "github.com/spf13/cobra"
	_ "go.yaml.in/yaml/v3"
)

var _, _, _ = http.Get, json.Marshal, tls.Client

func main() { fmt.Println("hello") }
`

// BuildFloor builds FloorSource as dir/depsfloor (see buildAgainst).
func BuildFloor(ctx context.Context, dir, modRoot string) (string, error) {
	return buildAgainst(ctx, dir, modRoot, "depsfloor", FloorSource)
}

// BuildChosenFloor builds ChosenFloorSource as dir/chosenfloor (see
// buildAgainst).
func BuildChosenFloor(ctx context.Context, dir, modRoot string) (string, error) {
	return buildAgainst(ctx, dir, modRoot, "chosenfloor", ChosenFloorSource)
}

// buildAgainst builds the one-file program src as dir/name, with
// CGO_ENABLED=0 as `make build` builds the agent, in a module whose
// requirements are modRoot's (its go.mod under another module path, and
// its go.sum), so the versions are the binary's and the modules come from
// the cache the agent's own build filled.
func buildAgainst(ctx context.Context, dir, modRoot, name, src string) (string, error) {
	mod, err := os.ReadFile(filepath.Join(modRoot, "go.mod"))
	if err != nil {
		return "", err
	}
	sum, err := os.ReadFile(filepath.Join(modRoot, "go.sum"))
	if err != nil {
		return "", err
	}
	first, rest, ok := strings.Cut(string(mod), "\n")
	if !ok || !strings.HasPrefix(first, "module ") {
		return "", fmt.Errorf("%s: the first line is not a module line", filepath.Join(modRoot, "go.mod"))
	}
	return buildModule(ctx, dir, name, map[string][]byte{"go.mod": []byte("module " + name + "\n" + rest), "go.sum": sum, "main.go": []byte(src)})
}

// BuildHello builds the one-file program src, a module of its own with no
// requirements, as dir/name, with CGO_ENABLED=0 as `make build` builds the
// agent.
func BuildHello(ctx context.Context, dir, name, src string) (string, error) {
	return buildModule(ctx, dir, name, map[string][]byte{"go.mod": []byte("module " + name + "\n"), "main.go": []byte(src)})
}

// buildModule writes files into dir/<name>src and builds it as dir/name.
func buildModule(ctx context.Context, dir, name string, files map[string][]byte) (string, error) {
	src := filepath.Join(dir, name+"src")
	if err := os.MkdirAll(src, 0o700); err != nil {
		return "", err
	}
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(src, f), b, 0o600); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(dir, name)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Dir = src
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", name, err, out)
	}
	return bin, nil
}
