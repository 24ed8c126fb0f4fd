//go:build e2e

package e2e

import "testing"

func testFlatcarIgnition(t *testing.T, c *cluster) {
	t.Skip("todo")
}
