package render

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/osmhq/osm/crds/cluster/v1alpha1"
)

// Keys of the v1.kubelet-config.machine-controller.kubermatic.io/<Key> annotations, as machine-controller and
// upstream OSM define them.
const (
	KubeletKubeReserved                = "KubeReserved"
	KubeletSystemReserved              = "SystemReserved"
	KubeletEvictionHard                = "EvictionHard"
	KubeletMaxPods                     = "MaxPods"
	KubeletContainerLogMaxSize         = "ContainerLogMaxSize"
	KubeletContainerLogMaxFiles        = "ContainerLogMaxFiles"
	KubeletImageGCHighThresholdPercent = "ImageGCHighThresholdPercent"
	KubeletImageGCLowThresholdPercent  = "ImageGCLowThresholdPercent"
	KubeletImageMinimumGCAge           = "ImageMinimumGCAge"
	KubeletImageMaximumGCAge           = "ImageMaximumGCAge"
)

// KubeletConfig is what the kubelet-config annotations ask for. Field types follow upstream OSM's template data
// (pointers mean "not set"), so `{{ with .MaxPods }}` in an upstream profile behaves the same.
type KubeletConfig struct {
	KubeReserved                *map[string]string
	SystemReserved              *map[string]string
	EvictionHard                *map[string]string
	MaxPods                     *int32
	ContainerLogMaxSize         *string
	ContainerLogMaxFiles        *string
	ImageGCHighThresholdPercent *int32
	ImageGCLowThresholdPercent  *int32
	ImageMinimumGCAge           *metav1.Duration
	ImageMaximumGCAge           *metav1.Duration
}

// ParseKubeletConfig reads the MachineDeployment's kubelet-config annotations. Unknown keys are ignored, as
// upstream does; a value that does not parse is an error naming the annotation.
func ParseKubeletConfig(annotations map[string]string) (KubeletConfig, error) {
	var kc KubeletConfig
	for name, value := range annotations {
		key, ok := strings.CutPrefix(name, clusterv1alpha1.AnnotationKubeletConfigPrefix)
		if !ok {
			continue
		}
		if err := kc.set(key, value); err != nil {
			return KubeletConfig{}, fmt.Errorf("annotation %s: %w", name, err)
		}
	}
	return kc, nil
}

func (kc *KubeletConfig) set(key, value string) error {
	switch key {
	case KubeletKubeReserved:
		kc.KubeReserved = parsePairs(value, "=")
	case KubeletSystemReserved:
		kc.SystemReserved = parsePairs(value, "=")
	case KubeletEvictionHard:
		kc.EvictionHard = parsePairs(value, "<")
	case KubeletMaxPods:
		return parseInt32(value, &kc.MaxPods)
	case KubeletContainerLogMaxSize:
		kc.ContainerLogMaxSize = &value
	case KubeletContainerLogMaxFiles:
		if _, err := strconv.ParseInt(value, 10, 32); err != nil {
			return fmt.Errorf("%q is not a number", value)
		}
		kc.ContainerLogMaxFiles = &value
	case KubeletImageGCHighThresholdPercent:
		return parseInt32(value, &kc.ImageGCHighThresholdPercent)
	case KubeletImageGCLowThresholdPercent:
		return parseInt32(value, &kc.ImageGCLowThresholdPercent)
	case KubeletImageMinimumGCAge:
		return parseDuration(value, &kc.ImageMinimumGCAge)
	case KubeletImageMaximumGCAge:
		return parseDuration(value, &kc.ImageMaximumGCAge)
	}
	return nil
}

// parsePairs reads "a=1,b=2" (or "a<1" for eviction thresholds); pairs without the separator are ignored, as
// upstream does.
func parsePairs(s, sep string) *map[string]string {
	m := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(pair, sep)
		if !ok {
			continue
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return &m
}

func parseInt32(s string, into **int32) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
	if err != nil {
		return fmt.Errorf("%q is not a 32-bit integer", s)
	}
	v := int32(n)
	*into = &v
	return nil
}

func parseDuration(s string, into **metav1.Duration) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not a duration: %w", s, err)
	}
	*into = &metav1.Duration{Duration: d}
	return nil
}
