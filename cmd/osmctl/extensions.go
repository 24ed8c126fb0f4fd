package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/extension"
)

// extensionFiles are OperatingSystemProfileExtension files applied to a render, as the controller applies the
// extensions of the profile's namespace.
type extensionFiles []string

func (x *extensionFiles) addFlag(f *pflag.FlagSet, name, usage string) {
	f.StringArrayVar((*[]string)(x), name, nil, usage)
}

// forProfile reads the files and returns the extensions that select osp for the MachineDeployment's cloud
// provider, in the order the controller applies them. Offline there is no namespace to match: every extension
// is taken as living in the profile's.
func (x extensionFiles) forProfile(osp *osmv1alpha1.OperatingSystemProfile, md *clusterv1alpha1.MachineDeployment) ([]*osmv1alpha1.OperatingSystemProfileExtension, error) {
	if len(x) == 0 {
		return nil, nil
	}
	all, err := readExtensions(x, osp.Namespace)
	if err != nil {
		return nil, err
	}
	pc, err := md.ProviderConfig()
	if err != nil {
		return nil, err
	}
	return extension.For(osp, pc.CloudProvider, all)
}

func readExtensions(paths []string, namespace string) ([]osmv1alpha1.OperatingSystemProfileExtension, error) {
	var out []osmv1alpha1.OperatingSystemProfileExtension
	for _, p := range paths {
		x := osmv1alpha1.OperatingSystemProfileExtension{}
		if err := readObject(p, &x); err != nil {
			return nil, err
		}
		if x.Kind != "" && x.Kind != "OperatingSystemProfileExtension" {
			return nil, fmt.Errorf("%s: kind %s, want OperatingSystemProfileExtension", p, x.Kind)
		}
		x.Namespace = namespace
		out = append(out, x)
	}
	return out, nil
}

// extensionNames lists what an extension list contains, for messages.
func extensionNames(xs []*osmv1alpha1.OperatingSystemProfileExtension) []string {
	names := make([]string, 0, len(xs))
	for _, x := range xs {
		names = append(names, x.Name)
	}
	return names
}

// kindOf reads the kind of the object in a YAML file.
func kindOf(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var tm struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return tm.Kind, nil
}
