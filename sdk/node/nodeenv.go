package node

// NodeEnvScript writes osm-node-env, which kubelet.service runs before every start: it finds the node IP(s) of
// the machine's IP family from the default routes and the node name, and writes both for the kubelet's
// --node-ip and --hostname-override. Doing this at every start instead of once keeps a node correct after
// its address changed across a reboot.
func NodeEnvScript(r *Request) string {
	s := NewScript("osm-node-env", "find the kubelet's node IP and host name ("+NodeEnvPath+").")
	s.Line(`src() { ip -o "$1" route get "$2" 2>/dev/null | sed -n 's/.* src \([^ ]*\).*/\1/p' | head -n 1 || true; }`)
	// Route lookups do not send packets; the addresses only select the default routes.
	switch r.IPFamily() {
	case "IPv6":
		s.Line("ip=$(src -6 2001:4860:4860::8888)")
	case "IPv4+IPv6":
		s.Line("v4=$(src -4 1.1.1.1) v6=$(src -6 2001:4860:4860::8888)")
		s.Line(`if [ -z "$v4" ] || [ -z "$v6" ]; then log "no IPv4 or no IPv6 default route (got '$v4' and '$v6') for a dual-stack node"; exit 1; fi`)
		s.Line(`ip="$v4,$v6"`)
	case "IPv6+IPv4":
		s.Line("v4=$(src -4 1.1.1.1) v6=$(src -6 2001:4860:4860::8888)")
		s.Line(`if [ -z "$v4" ] || [ -z "$v6" ]; then log "no IPv4 or no IPv6 default route (got '$v4' and '$v6') for a dual-stack node"; exit 1; fi`)
		s.Line(`ip="$v6,$v4"`)
	default:
		s.Line("ip=$(src -4 1.1.1.1)")
	}
	s.Line(`if [ -z "$ip" ]; then log "no default route to take the node IP from"; exit 1; fi`)
	s.Section("The node name: the machine's name from machine-controller when there is one.")
	s.Line(`name=$(hostname -f 2>/dev/null || hostname)`)
	hook := &Script{}
	if r.OS.Hostname != nil {
		r.OS.Hostname(r, hook)
	}
	s.Line(`if [ -s ` + MachineNamePath + ` ]; then`)
	s.Line(`  name=$(cat ` + MachineNamePath + `)`)
	if hook.String() != "" {
		s.Line(`else`)
		s.Line(`  # OS.Hostname`)
		s.Raw(hook.String())
	}
	s.Line(`fi`)
	s.Line(`if [ -z "$name" ]; then log "no host name for the kubelet (hostname -f, OS.Hostname)"; exit 1; fi`)
	s.Line(`name=$(printf '%s' "$name" | tr '[:upper:]' '[:lower:]')`)
	s.Line("mkdir -p " + dir(NodeEnvPath))
	s.Line(`printf 'KUBELET_NODE_IP=%s\nKUBELET_HOSTNAME=%s\n' "$ip" "$name" >` + NodeEnvPath + ".tmp")
	s.Line("mv " + NodeEnvPath + ".tmp " + NodeEnvPath)
	return s.String()
}

func dir(path string) string {
	for i := len(path) - 1; i > 0; i-- {
		if path[i] == '/' {
			return path[:i]
		}
	}
	return "/"
}
