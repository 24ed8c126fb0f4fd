package runtime

// PathOf says how m's calls run: "fast+metered" (fast I/O path, instrumented interrupt checks), "fast" (fast
// I/O path, wazero's close-on-context-done) or "standard" (Extism).
func PathOf(m *Module) string {
	switch {
	case m.compiled.fast == nil:
		return "standard"
	case m.compiled.fast.metered:
		return "fast+metered"
	default:
		return "fast"
	}
}
