package render

import (
	"encoding/json"
)

// Provider and OS specs of a MachineDeployment hold credentials next to plain settings, under names that differ
// from provider to provider (accessKeyId, secretAccessKey, secretKey, apiKey, accessKeySecret, token, ...). A
// list of names to remove always misses one, so OSM keeps only the names listed here, known to be settings,
// and drops everything else before a spec reaches a plugin, a template or an OperatingSystemConfig.

// providerSpecKeys are the cloudProviderSpec fields (machine-controller's names) kept for every provider:
// where a machine runs and what it is made of.
var providerSpecKeys = keys(
	// placement
	"region", "zone", "availabilityZone", "location", "datacenter", "datacenterName", "cluster", "folder",
	"resourceGroup", "vnetResourceGroup", "project", "projectID", "tenantName", "domainName", "vmFolder",
	"resourcePool", "datastore", "datastoreCluster", "computeResource", "placementGroup", "vdc", "catalog",
	// network
	"vpcId", "vpcID", "subnetId", "subnetID", "subnet", "subnetName", "vnetName", "network", "networks",
	"networkID", "securityGroups", "securityGroupIDs", "floatingIPPool", "assignPublicIP", "assignPublicIp",
	"publicIP", "ipFamily", "routeTableName", "loadBalancerSku", "privateNetworking", "ipv6",
	// machine
	"instanceType", "machineType", "serverType", "size", "plan", "flavor", "vmSize", "cpus", "cpu", "memoryMB",
	"memory", "image", "imageID", "ami", "template", "templateVMName", "diskSize", "diskSizeGB", "diskType",
	"diskIops", "rootDiskSizeGB", "rootDiskType", "osDiskSize", "osDiskSKU", "dataDiskSize", "ebsVolumeEncrypted",
	"isSpotInstance", "preemptible", "instanceProfile", "tags", "labels",
)

// osSpecKeys are the operatingSystemSpec fields kept: the ones templates and plugins act on, without the RHEL
// subscription password and offline token.
var osSpecKeys = keys(
	"distUpgradeOnBoot", "disableAutoUpdate", "disableLocksmithD", "disableUpdateEngine", "provisioningUtility",
	"attachSubscription", "rhelSubscriptionManagerUser", "rhelUseSatelliteServer", "rhelSatelliteServer",
)

func keys(names ...string) map[string]bool {
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out
}

// allowed returns the top-level fields of the JSON object raw that are in allow, and nothing else. Anything
// that is not an object (or not JSON) yields nil.
func allowed(raw []byte, allow map[string]bool) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil
	}
	for k := range fields {
		if !allow[k] {
			delete(fields, k)
		}
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return nil
	}
	return out
}

// ProviderSpec is the MachineDeployment's cloudProviderSpec with only the allowed fields.
func ProviderSpec(raw []byte) json.RawMessage { return allowed(raw, providerSpecKeys) }

// OSSpec is the MachineDeployment's operatingSystemSpec with only the allowed fields.
func OSSpec(raw []byte) json.RawMessage { return allowed(raw, osSpecKeys) }
