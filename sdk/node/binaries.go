package node

import (
	"fmt"
	"strings"
)

// CRIToolsVersion is the cri-tools release installed for the request: the configured one, else the kubelet's
// minor (cri-tools is released with every Kubernetes minor), at most the newest release this plugin knows.
func CRIToolsVersion(r *Request) string {
	if v := r.Config[KeyCRIToolsVersion]; v != "" {
		return v
	}
	return fmt.Sprintf("v1.%d.0", min(r.Kube.Minor, LatestCRIToolsMinor))
}

// DownloadHelper writes the shell prelude every download of osm-setup uses: $arch (amd64 or arm64, else the
// script stops), $tmp (a temporary directory removed at exit), and the function `download URL FILE [SUMURL]`,
// which fetches URL to FILE with retries and fails unless FILE's SHA-256 equals the first word of SUMURL
// (default URL.sha256, the layout of the Kubernetes, CNI and cri-tools releases). osm-setup writes it before
// OS.Install, so an OS's Install can download verified release archives too.
func DownloadHelper(s *Script) {
	s.Section("Downloads: each one is verified with the SHA-256 published next to it.")
	s.Raw(`case "$(uname -m)" in
x86_64) arch=amd64 ;;
aarch64) arch=arm64 ;;
*) log "unsupported CPU architecture $(uname -m)"; exit 1 ;;
esac
download() {
  curl -fsSL --retry 10 --retry-delay 3 --retry-all-errors -o "$2" "$1"
  want=$(curl -fsSL --retry 10 --retry-delay 3 --retry-all-errors "${3:-$1.sha256}" | awk '{print $1}')
  got=$(sha256sum "$2" | awk '{print $1}')
  if [ -z "$want" ] || [ "$want" != "$got" ]; then
    log "checksum mismatch for $1: got $got, want ${want:-nothing}"
    rm -f "$2"
    return 1
  fi
}
tmp=$(mktemp -d)
# One EXIT trap per shell: this one keeps osm-setup's failure report (osm_on_exit, sdk/SPEC.md §11).
trap 'osm_rc=$?; rm -rf "$tmp"; ! declare -F osm_on_exit >/dev/null || osm_on_exit "$osm_rc"' EXIT
`)
}

// Binaries writes the part of osm-setup that installs the CNI plugins, crictl and the Kubernetes binaries
// (kubelet, kubeadm, kubectl) for the machine's architecture with DownloadHelper's download, which must be
// written before. The Kubernetes binaries come from the controller's binary base URL (context.binaryBaseURL),
// the others from the cniBaseURL and criToolsBaseURL options, so air-gapped sites point all of them at a
// mirror. Every download is skipped when the same version is in place, so a re-run of osm-setup after a
// failure does not download everything again.
func Binaries(r *Request, s *Script) {
	kubeBase := strings.TrimRight(orDefault(r.Ctx.BinaryBaseURL, "https://dl.k8s.io"), "/")
	s.Section("Kubernetes node binaries, CNI plugins and crictl.")
	s.Line("mkdir -p " + BinDir + " " + CNIBinDir + " /etc/cni/net.d " + StaticPodPath)
	s.Line("cni_version=" + Quote(r.Config[KeyCNIVersion]))
	s.Line("cni_base=" + Quote(strings.TrimRight(r.Config[KeyCNIBaseURL], "/")))
	s.Raw(`if [ "$(cat ` + CNIBinDir + `/.osm-version 2>/dev/null)" != "$cni_version" ]; then
  download "$cni_base/$cni_version/cni-plugins-linux-$arch-$cni_version.tgz" "$tmp/cni.tgz"
  tar -xzf "$tmp/cni.tgz" -C ` + CNIBinDir + `
  # Some CNI plugins refuse binaries not owned by root; the archive's owner is the release builder.
  chown -R root:root ` + CNIBinDir + `
  echo "$cni_version" >` + CNIBinDir + `/.osm-version
fi
`)
	s.Line("crictl_version=" + Quote(CRIToolsVersion(r)))
	s.Line("crictl_base=" + Quote(strings.TrimRight(r.Config[KeyCRIToolsBaseURL], "/")))
	s.Raw(`if [ "$(cat ` + BinDir + `/.crictl-version 2>/dev/null)" != "$crictl_version" ]; then
  download "$crictl_base/$crictl_version/crictl-$crictl_version-linux-$arch.tar.gz" "$tmp/crictl.tgz"
  tar -xzf "$tmp/crictl.tgz" -C ` + BinDir + ` crictl
  echo "$crictl_version" >` + BinDir + `/.crictl-version
fi
`)
	s.Line("kube_version=" + Quote(r.Kube.String()))
	s.Line("kube_base=" + Quote(kubeBase))
	s.Raw(`kube_dir=` + BinDir + `/kubernetes-$kube_version
if [ ! -e "$kube_dir/.complete" ]; then
  mkdir -p "$kube_dir"
  for bin in kubelet kubeadm kubectl; do
    download "$kube_base/$kube_version/bin/linux/$arch/$bin" "$kube_dir/$bin"
    chmod 0755 "$kube_dir/$bin"
  done
  touch "$kube_dir/.complete"
fi
for bin in kubelet kubeadm kubectl; do
  ln -sf "$kube_dir/$bin" ` + BinDir + `/$bin
done
`)
}
