// SPDX-License-Identifier: Apache-2.0

package otlpfile

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// request returns a request of one span named name.
func request(name string) ptrace.Traces {
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName(name)
	sp.SetTraceID([16]byte{1})
	sp.SetSpanID([8]byte{2})
	return td
}

func protoOf(t *testing.T, td ptrace.Traces) []byte {
	t.Helper()
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	return b
}

func jsonOf(t *testing.T, td ptrace.Traces) []byte {
	t.Helper()
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	return b
}

// delimited frames messages as the file exporter's proto format does.
func delimited(msgs ...[]byte) []byte {
	var out []byte
	for _, m := range msgs {
		out = binary.BigEndian.AppendUint32(out, uint32(len(m)))
		out = append(out, m...)
	}
	return out
}

func TestRead(t *testing.T) {
	a, b := request("a"), request("b")
	tests := []struct {
		name    string
		content func(t *testing.T) []byte
		want    []string // span names, one per request
		err     string
	}{
		{"empty file", func(*testing.T) []byte { return nil }, nil, ""},
		{"one protobuf request", func(t *testing.T) []byte { return protoOf(t, a) }, []string{"a"}, ""},
		{"JSON lines, as the file exporter writes them", func(t *testing.T) []byte {
			return bytes.Join([][]byte{jsonOf(t, a), jsonOf(t, b), nil}, []byte("\n"))
		}, []string{"a", "b"}, ""},
		{"length-prefixed protobuf, as the file exporter's proto format writes it", func(t *testing.T) []byte {
			return delimited(protoOf(t, a), protoOf(t, b))
		}, []string{"a", "b"}, ""},
		{"a length-prefixed empty request", func(*testing.T) []byte { return delimited(nil) }, []string{""}, ""},
		{"length-prefixed, cut inside a message", func(t *testing.T) []byte {
			whole := delimited(protoOf(t, a), protoOf(t, b))
			return whole[:len(whole)-3]
		}, []string{"a"}, "protobuf message 2 (byte "},
		{"length-prefixed, cut inside a length", func(t *testing.T) []byte {
			return append(delimited(protoOf(t, a)), 0, 0)
		}, []string{"a"}, "protobuf message 2 (byte "},
		{"a length no OTLP file announces", func(t *testing.T) []byte {
			return append(delimited(protoOf(t, a)), 0xff, 0xff, 0xff, 0xff, 1)
		}, []string{"a"}, "more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			err := Read(bytes.NewReader(tt.content(t)), func(td ptrace.Traces) {
				name := ""
				if td.SpanCount() > 0 {
					name = td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Name()
				}
				got = append(got, name)
			})
			if tt.err == "" {
				assert.NoError(t, err)
			} else if assert.Error(t, err) {
				assert.True(t, strings.Contains(err.Error(), tt.err), "error %q does not say %q", err, tt.err)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}
