package checkpoint

import "fmt"

// LoadFile verifies and decodes a checkpoint file from anywhere (say, a CI
// artifact) without taking it into a store, so that a caller can look at it
// (its upgrade_server) before Import. The checks are Load's.
func LoadFile(path string) (*Checkpoint, error) {
	data, _, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	cp, _, err := decode(path, data, "")
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	return cp, nil
}
