// Package drifttest holds the object pairs every drift decision is tested
// against: the engine's self-heal, the diff routes' modified and the drift
// package itself read the same pairs and must reach each pair's answer.
package drifttest

import (
	_ "embed"
	"encoding/json"
	"fmt"
)

//go:embed pairs.json
var pairsJSON []byte

// The object every pair describes.
const (
	APIVersion = "hanzo.ai/v1"
	Kind       = "App"
	Namespace  = "hanzo"
	Name       = "gateway"
)

// Pair is a live object, the state declared for it, and whether live has
// drifted from it.
type Pair struct {
	Name          string
	Live, Desired map[string]any
	Drifted       bool
}

// Pairs are the pairs, each side a complete App hanzo/gateway (fresh maps
// on every call).
func Pairs() []Pair {
	var raw []struct {
		Name          string
		Live, Desired map[string]any
		Drifted       bool
	}
	if err := json.Unmarshal(pairsJSON, &raw); err != nil {
		panic(fmt.Sprintf("drifttest: pairs.json: %v", err))
	}
	out := make([]Pair, len(raw))
	for i, r := range raw {
		out[i] = Pair{Name: r.Name, Live: complete(r.Live), Desired: complete(r.Desired), Drifted: r.Drifted}
	}
	return out
}

func complete(obj map[string]any) map[string]any {
	obj["apiVersion"], obj["kind"] = APIVersion, Kind
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	md["name"], md["namespace"] = Name, Namespace
	return obj
}
