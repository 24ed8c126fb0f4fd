// Package crds embeds the CustomResourceDefinitions generated from the API types, so that the controller,
// osmctl and the tests install exactly what the types describe.
package crds

import (
	"embed"
	"fmt"
	"io/fs"
	"path"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// OSM holds the OperatingSystemProfile and OperatingSystemConfig CRDs.
//
//go:embed bases/*.yaml
var osmFS embed.FS

// External holds CRDs that belong to other projects and that OSM only reads: machine-controller's
// MachineDeployment. They are for tests and local runs; a real cluster gets them from machine-controller.
//
//go:embed external/*.yaml
var externalFS embed.FS

// OSMDefinitions returns OSM's own CRDs.
func OSMDefinitions() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return decodeAll(osmFS, "bases")
}

// ExternalDefinitions returns the CRDs OSM reads but does not own.
func ExternalDefinitions() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return decodeAll(externalFS, "external")
}

func decodeAll(fsys embed.FS, dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		if path.Ext(e.Name()) != ".yaml" || e.Name() == "kustomization.yaml" {
			continue
		}
		data, err := fsys.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", e.Name(), err)
		}
		out = append(out, crd)
	}
	return out, nil
}
