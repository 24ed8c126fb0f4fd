package render

// SetIdentityPlaceholders turns the identity placeholders (identity.go) on or off and returns a function that
// restores the setting: tests compare with what plugins render from the real values.
func SetIdentityPlaceholders(on bool) (restore func()) {
	was := identityPlaceholders
	identityPlaceholders = on
	return func() { identityPlaceholders = was }
}
