package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestDemoCommandRegistered: the root command has demo with its flags (the
// demo itself is tested in package simulation).
func TestDemoCommandRegistered(t *testing.T) {
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"demo", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--dsn", "--keep", "--chain-requests", "--checkout-requests"} {
		if !strings.Contains(out.String(), flag) {
			t.Errorf("demo --help lacks %s:\n%s", flag, out.String())
		}
	}
}
