package node

import "github.com/osmhq/osm/sdk/abi"

// Keys of the package-related configuration of the apt and dnf families.
const (
	KeyContainerdSource  = "containerdSource"
	KeyContainerdVersion = "containerdVersion"
	KeyDockerRepoURL     = "dockerRepoURL"
	KeyExtraPackages     = "extraPackages"
	KeySELinux           = "selinux"
)

// Values of containerdSource.
const (
	// ContainerdDocker installs containerd.io from Docker's package repository (or a mirror of it).
	ContainerdDocker = "docker"
	// ContainerdDistro installs the distribution's own containerd package.
	ContainerdDistro = "distro"
	// ContainerdPreinstalled installs nothing: the image ships containerd 2.x.
	ContainerdPreinstalled = "preinstalled"
)

// DefaultDockerRepoURL is Docker's package repository; its layout is <url>/<distro>/... .
const DefaultDockerRepoURL = "https://download.docker.com/linux"

// DefaultContainerdVersion is the containerd.io version pattern ContainerdOptions defaults to.
const DefaultContainerdVersion = "2.2*"

// ContainerdOptions are the containerd keys of a package-managed distribution. sources lists the accepted
// containerdSource values, the first being the default; containerd must be 2.0 or newer because the
// controller writes a version 3 config.toml, which is why Docker's repository is the default where the
// distribution's own package is older. No sources means the image's own containerd (ContainerdPreinstalled)
// and an empty defaultVersion DefaultContainerdVersion.
func ContainerdOptions(sources []string, defaultVersion string) []Option {
	if len(sources) == 0 {
		sources = []string{ContainerdPreinstalled}
	}
	if defaultVersion == "" {
		defaultVersion = DefaultContainerdVersion
	}
	opts := []Option{
		{ConfigOption: abi.ConfigOption{Name: KeyContainerdSource, Type: abi.ConfigEnum, Default: sources[0], Enum: sources,
			Description: "Where containerd comes from: " + describeSources(sources) + ". containerd must be 2.0 or newer (OSM writes a version 3 config.toml); osm-setup fails with a clear message otherwise."}},
	}
	for _, s := range sources {
		if s == ContainerdDocker {
			opts = append(opts,
				Option{ConfigOption: abi.ConfigOption{Name: KeyDockerRepoURL, Default: DefaultDockerRepoURL,
					Description: "Docker's package repository or a mirror with the same layout, used when containerdSource is docker."}, Check: BaseURL},
				Option{ConfigOption: abi.ConfigOption{Name: KeyContainerdVersion, Default: defaultVersion,
					Description: "Version pattern of the containerd.io package from Docker's repository (package manager glob syntax), e.g. 2.2*."}, Check: VersionPattern})
		}
	}
	return opts
}

// ExtraPackagesOption lets operators add packages to every node without a template.
func ExtraPackagesOption() Option {
	return Option{ConfigOption: abi.ConfigOption{Name: KeyExtraPackages, Type: abi.ConfigList,
		Description: "Additional packages osm-setup installs, separated by spaces or commas, e.g. \"open-iscsi multipath-tools\"."}, Check: PackageList}
}

func describeSources(sources []string) string {
	var out string
	for i, s := range sources {
		if i > 0 {
			out += ", "
		}
		switch s {
		case ContainerdDocker:
			out += "docker (containerd.io from Docker's repository, dockerRepoURL)"
		case ContainerdDistro:
			out += "distro (the distribution's containerd package)"
		case ContainerdPreinstalled:
			out += "preinstalled (already in the image; nothing is installed)"
		}
	}
	return out
}
