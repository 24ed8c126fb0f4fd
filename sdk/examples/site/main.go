// Command site is a site plugin for OperatingSystemProfileExtensions: it adds a site CA, NTP servers, sysctls
// and packages to the provisioning stage of Ubuntu and Debian nodes, whatever profile renders them. An
// extension runs it after the profile's own plugins:
//
//	spec:
//	  selector: {osNames: [ubuntu, debian]}
//	  plugins:
//	    - image: registry.example.com/osm/site@sha256:<digest>
//	      config: {caBundle: "...", ntpServers: "ntp1.site ntp2.site", sysctls: "vm.max_map_count=262144", packages: nfs-common}
//
// Build it like every plugin:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o site.wasm .
package main

import "github.com/osmhq/osm/sdk/guest"

func init() { guest.Register(Plugin{}) }

func main() {}
