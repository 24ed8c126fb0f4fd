// Package extension applies OperatingSystemProfileExtensions: it chooses the extensions that select a profile,
// orders them deterministically, and merges what each adds into a rendered stage, refusing silent last-wins
// collisions.
package extension

import (
	"fmt"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

// Selects reports whether sel selects the profile for machines of the cloud provider. Every set field must
// match; an empty selector selects every profile.
func Selects(sel osmv1alpha1.ProfileSelector, osp *osmv1alpha1.OperatingSystemProfile, cloudProvider string) (bool, error) {
	if len(sel.Names) > 0 && !slices.Contains(sel.Names, osp.Name) {
		return false, nil
	}
	if len(sel.OSNames) > 0 && !slices.Contains(sel.OSNames, osp.Spec.OSName) {
		return false, nil
	}
	if len(sel.OSVersions) > 0 && !slices.Contains(sel.OSVersions, osp.Spec.OSVersion) {
		return false, nil
	}
	if len(sel.CloudProviders) > 0 && !slices.Contains(sel.CloudProviders, cloudProvider) {
		return false, nil
	}
	if sel.LabelSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(sel.LabelSelector)
		if err != nil {
			return false, fmt.Errorf("spec.selector.labelSelector: %w", err)
		}
		if !s.Matches(labels.Set(osp.Labels)) {
			return false, nil
		}
	}
	return true, nil
}

// SelectsProfile reports whether sel selects the profile for some cloud provider, ignoring the provider: what an
// extension's status lists and what decides which MachineDeployments re-render when an extension changes.
func SelectsProfile(sel osmv1alpha1.ProfileSelector, osp *osmv1alpha1.OperatingSystemProfile) (bool, error) {
	sel.CloudProviders = nil
	return Selects(sel, osp, "")
}

// For returns the extensions among all that apply to the profile for machines of the cloud provider, in the
// order they apply: ascending spec.order, then name. Extensions being deleted and those in other namespaces
// are left out. A selector that does not parse is an error naming the extension, so that a broken extension
// fails the machines it may have selected loudly instead of being skipped.
func For(osp *osmv1alpha1.OperatingSystemProfile, cloudProvider string, all []osmv1alpha1.OperatingSystemProfileExtension) ([]*osmv1alpha1.OperatingSystemProfileExtension, error) {
	var out []*osmv1alpha1.OperatingSystemProfileExtension
	for i := range all {
		x := &all[i]
		if x.Namespace != osp.Namespace || x.DeletionTimestamp != nil {
			continue
		}
		ok, err := Selects(x.Spec.Selector, osp, cloudProvider)
		if err != nil {
			return nil, fmt.Errorf("OperatingSystemProfileExtension %s/%s: %w", x.Namespace, x.Name, err)
		}
		if ok {
			out = append(out, x)
		}
	}
	Sort(out)
	return out, nil
}

// Sort orders extensions as they apply: ascending spec.order, then name.
func Sort(xs []*osmv1alpha1.OperatingSystemProfileExtension) {
	sort.SliceStable(xs, func(i, j int) bool {
		if xs[i].Spec.Order != xs[j].Spec.Order {
			return xs[i].Spec.Order < xs[j].Spec.Order
		}
		return xs[i].Name < xs[j].Name
	})
}
