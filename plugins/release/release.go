// Package release holds the version of the default OS plugins. The default profiles (plugins/osps) pin the
// same version, so it changes with them.
package release

// Version is the plugin version (Metadata.Version) of every default plugin.
const Version = "v1.0.0"
