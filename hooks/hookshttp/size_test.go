// SPDX-License-Identifier: Apache-2.0

package hookshttp

import (
	"testing"
	"unsafe"
)

// TestServerCallSize keeps the middleware's one allocation per request
// within 512 bytes: larger objects take the allocator's slower path with a
// per-object header, which measurably costs more than the bytes.
func TestServerCallSize(t *testing.T) {
	if size := unsafe.Sizeof(serverCall{}); size > 512 {
		t.Errorf("serverCall is %d bytes, over 512", size)
	}
}
