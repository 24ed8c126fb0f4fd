package render

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"
	"k8s.io/apimachinery/pkg/api/resource"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
)

// Kubelet versions OSM renders for. The profiles and plugins know the kubelet flags and files of these minor
// versions; anything outside (a typo such as 1.330.0, or 2.0.0) would render a node that cannot join, so it is
// refused with a condition instead.
var (
	MinKubeletVersion = semver.MustParse("1.25.0")
	MaxKubeletMinor   = uint64(40)
)

// maxPodsLimit bounds the MaxPods annotation; kubelets run a few hundred pods at most.
const maxPodsLimit = 10000

// invalid marks an error in the MachineDeployment's own fields.
func invalid(err error) error { return withReason(osmv1alpha1.ReasonInvalidMachineDeployment, err) }

// checkKubeletVersion refuses kubelet versions outside what OSM renders for.
func checkKubeletVersion(v *semver.Version) error {
	if v.Major() != 1 || v.LessThan(MinKubeletVersion) || v.Minor() > MaxKubeletMinor {
		return fmt.Errorf("spec.template.spec.versions.kubelet %s is outside the supported range %s to 1.%d.x", v.Original(), MinKubeletVersion, MaxKubeletMinor)
	}
	return nil
}

// validate checks the values the kubelet-config annotations ask for, as the kubelet would refuse them at boot:
// percentages within 0-100 (and the low image GC threshold below the high one), resource quantities that
// parse, a positive pod limit, at least two log files.
func (kc KubeletConfig) validate() error {
	var errs []error
	percent := func(key string, p *int32) {
		if p != nil && (*p < 0 || *p > 100) {
			errs = append(errs, fmt.Errorf("%s %d is not a percentage (0-100)", key, *p))
		}
	}
	percent(KubeletImageGCHighThresholdPercent, kc.ImageGCHighThresholdPercent)
	percent(KubeletImageGCLowThresholdPercent, kc.ImageGCLowThresholdPercent)
	if h, l := kc.ImageGCHighThresholdPercent, kc.ImageGCLowThresholdPercent; h != nil && l != nil && *l >= *h {
		errs = append(errs, fmt.Errorf("%s %d must be below %s %d", KubeletImageGCLowThresholdPercent, *l, KubeletImageGCHighThresholdPercent, *h))
	}
	if kc.MaxPods != nil && (*kc.MaxPods < 1 || *kc.MaxPods > maxPodsLimit) {
		errs = append(errs, fmt.Errorf("%s %d is outside 1-%d", KubeletMaxPods, *kc.MaxPods, maxPodsLimit))
	}
	if f := kc.ContainerLogMaxFiles; f != nil {
		if n, _ := strconv.Atoi(*f); n < 2 {
			errs = append(errs, fmt.Errorf("%s %s is less than 2", KubeletContainerLogMaxFiles, *f))
		}
	}
	if s := kc.ContainerLogMaxSize; s != nil {
		if q, err := resource.ParseQuantity(*s); err != nil || q.Sign() <= 0 {
			errs = append(errs, fmt.Errorf("%s %q is not a positive size", KubeletContainerLogMaxSize, *s))
		}
	}
	for key, pairs := range map[string]*map[string]string{KubeletKubeReserved: kc.KubeReserved, KubeletSystemReserved: kc.SystemReserved} {
		if pairs == nil {
			continue
		}
		for name, v := range *pairs {
			if q, err := resource.ParseQuantity(v); err != nil || q.Sign() < 0 {
				errs = append(errs, fmt.Errorf("%s %s=%q is not a quantity", key, name, v))
			}
		}
	}
	if kc.EvictionHard != nil {
		for signal, v := range *kc.EvictionHard {
			errs = append(errs, evictionThreshold(signal, v))
		}
	}
	for key, d := range map[string]bool{KubeletImageMinimumGCAge: kc.ImageMinimumGCAge != nil && kc.ImageMinimumGCAge.Duration < 0,
		KubeletImageMaximumGCAge: kc.ImageMaximumGCAge != nil && kc.ImageMaximumGCAge.Duration < 0} {
		if d {
			errs = append(errs, fmt.Errorf("%s is negative", key))
		}
	}
	return errors.Join(errs...)
}

// evictionThreshold checks one EvictionHard threshold: a percentage within 0-100% or a quantity.
func evictionThreshold(signal, v string) error {
	if p, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f < 0 || f > 100 {
			return fmt.Errorf("%s %s<%s is not a percentage (0-100%%)", KubeletEvictionHard, signal, v)
		}
		return nil
	}
	if q, err := resource.ParseQuantity(v); err != nil || q.Sign() < 0 {
		return fmt.Errorf("%s %s<%q is neither a percentage nor a quantity", KubeletEvictionHard, signal, v)
	}
	return nil
}
