package cloudinittest

import "testing"

// TestCheckRejects proves the validator is real: cloud-init must reject a malformed document.
func TestCheckRejects(t *testing.T) {
	if err := Check(t, []byte("#cloud-config\nwrite_files: not-a-list\n")); err == nil {
		t.Fatal("cloud-init accepted write_files as a string")
	}
	if err := Check(t, []byte("#cloud-config\nwrite_files:\n- path: /a\n  permissions: 644\n  content: x\n")); err == nil {
		t.Fatal("cloud-init accepted integer permissions")
	}
	if err := Check(t, []byte("#cloud-config\nruncmd:\n- echo ok\n")); err != nil {
		t.Fatalf("cloud-init rejected a valid document: %v", err)
	}
}
