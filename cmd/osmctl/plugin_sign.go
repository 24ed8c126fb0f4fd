package main

import (
	"crypto"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/osmhq/osm/host/oci"
	"github.com/osmhq/osm/host/signature"
)

func newPluginSignCommand(p *pluginCommon) *cobra.Command {
	var keyFile, certFile, format string
	cmd := &cobra.Command{
		Use:   "sign REFERENCE --key KEY.pem [--certificate CERT.pem]",
		Short: "Sign a plugin artifact and attach the signature to it in its registry.",
		Long: `sign resolves the reference to its digest, signs that digest with a PEM private key (ECDSA, RSA or Ed25519;
unencrypted PKCS #8, SEC 1 or PKCS #1) and attaches the signature to the artifact as an OCI referrer in the
same registry: a Sigstore bundle (DSSE envelope over an in-toto statement naming the manifest digest), the
layout cosign writes. With --certificate, the bundle carries the key's certificate instead of a key hint,
for policies that trust a certificate authority (keyless authorities). With --format notation the signature is
a Notation JWS envelope, as the notation CLI writes it, and --certificate is required: the key's chain, leaf
first, root last. Nothing is sent anywhere but to the artifact's registry: no transparency log, no timestamp
authority.

Prints the signed reference, pinned by digest, and the signature's digest. "osmctl plugin mirror", "save"
and "load" carry the signature with the artifact.`,
		Example: `  osmctl plugin sign registry.example.com/osm/myos:0.1.0 --key osm-signing.key
  osmctl plugin sign registry.example.com/osm/myos@sha256:... --key leaf.key --certificate leaf.pem
  osmctl plugin sign registry.example.com/osm/myos:0.1.0 --format notation --key leaf.key --certificate chain.pem`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			keyPEM, err := os.ReadFile(keyFile)
			if err != nil {
				return fmt.Errorf("--key: %w", err)
			}
			var s signature.Signer
			if s.Key, err = signature.ParsePrivateKey(keyPEM); err != nil {
				return fmt.Errorf("--key %s: %w", keyFile, err)
			}
			client, err := p.g.ociClient(&p.registry)
			if err != nil {
				return err
			}
			if format == "notation" {
				return signNotation(cmd, p, client, args[0], s.Key, certFile)
			}
			if format != "sigstore" {
				return fmt.Errorf("--format %q: want sigstore or notation", format)
			}
			if certFile != "" {
				certPEM, err := os.ReadFile(certFile)
				if err != nil {
					return fmt.Errorf("--certificate: %w", err)
				}
				certs, err := signature.ParseCertificates(certPEM)
				if err != nil {
					return fmt.Errorf("--certificate %s: %w", certFile, err)
				}
				if len(certs) != 1 {
					return fmt.Errorf("--certificate %s: want exactly one PEM certificate, not %d (intermediates belong in the verifier's trusted root)", certFile, len(certs))
				}
				s.Certificate = certs[0]
			}
			pinned, sig, err := signature.Sign(cmd.Context(), client, args[0], s)
			if err != nil {
				return p.registry.explain(err)
			}
			cmd.PrintErrf("osmctl: signed %s; signature %s\n", pinned, sig)
			_, err = fmt.Fprintln(cmd.OutOrStdout(), pinned)
			return err
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "PEM private key file to sign with.")
	cmd.Flags().StringVar(&certFile, "certificate", "", "PEM certificate of the key, for certificate-based signatures (with --format notation: the chain, leaf first, root last).")
	cmd.Flags().StringVar(&format, "format", "sigstore", "Signature format: sigstore (a Sigstore bundle, as cosign writes) or notation (a Notation JWS envelope).")
	_ = cmd.MarkFlagRequired("key")
	return cmd
}

func newPluginVerifyCommand(p *pluginCommon) *cobra.Command {
	var (
		keyFiles []string
		keyless  signature.Keyless
		rootFile string
		notary   signature.NotationAuthority
		caFile   string
	)
	cmd := &cobra.Command{
		Use:   "verify REFERENCE (--key KEY.pub... | --trusted-root trusted_root.json --certificate-identity ... --certificate-oidc-issuer ...)",
		Short: "Verify a plugin artifact's signatures offline, as the controller's policy does.",
		Long: `verify pulls the artifact (checking its digests like every pull), lists the signatures attached to it in its
registry and checks them offline against the public keys given (PEM, any one suffices) or against a Sigstore
trusted root (trusted_root.json) and the identity its certificate must name, or (Notation signatures) against
the CA certificates of --notation-trust-store and the identities of --notation-identity, exactly as the controller does
under a verification policy (docs/security.md). It exits non-zero with SignatureMissing or SignatureInvalid
and the reason when no signature verifies; it prints the verified reference, pinned by digest, otherwise.`,
		Example: `  osmctl plugin verify registry.airgap.lan/osm/myos:0.1.0 --key osm-signing.pub
  osmctl plugin verify registry.example.com/osm/myos@sha256:... --trusted-root trusted_root.json \
      --certificate-identity plugins@vendor.example.com --certificate-oidc-issuer https://accounts.example.com`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			files := map[string][]byte{}
			policy := &signature.Policy{Rules: []signature.Rule{{Name: "command line", Mode: signature.ModeEnforce}}}
			for i, f := range keyFiles {
				data, err := os.ReadFile(f)
				if err != nil {
					return fmt.Errorf("--key: %w", err)
				}
				name := fmt.Sprintf("key %s", f)
				files[name] = data
				policy.Authorities = append(policy.Authorities, signature.Authority{Name: name, Keys: &signature.KeyRef{ConfigMap: name, Key: fmt.Sprint(i)}})
			}
			if rootFile != "" {
				data, err := os.ReadFile(rootFile)
				if err != nil {
					return fmt.Errorf("--trusted-root: %w", err)
				}
				files[rootFile] = data
				keyless.TrustedRoot = signature.KeyRef{ConfigMap: rootFile, Key: "trusted_root.json"}
				policy.Authorities = append(policy.Authorities, signature.Authority{Name: "root " + rootFile, Keyless: &keyless})
			}
			if caFile != "" {
				data, err := os.ReadFile(caFile)
				if err != nil {
					return fmt.Errorf("--notation-trust-store: %w", err)
				}
				files[caFile] = data
				notary.TrustStore = signature.KeyRef{ConfigMap: caFile, Key: "ca.pem"}
				policy.Authorities = append(policy.Authorities, signature.Authority{Name: "trust store " + caFile, Notation: &notary})
			}
			if len(policy.Authorities) == 0 {
				return errors.New("give --key, or --trusted-root with the certificate identity, or --notation-trust-store")
			}
			for _, a := range policy.Authorities {
				policy.Rules[0].Authorities = append(policy.Rules[0].Authorities, a.Name)
			}
			raw, err := json.Marshal(policy) // ParsePolicy checks what the flags built, as it checks a policy file
			if err != nil {
				return err
			}
			if policy, err = signature.ParsePolicy(raw); err != nil {
				return fmt.Errorf("%w (check the certificate flags)", err)
			}
			v, err := signature.NewVerifier("given on the command line", policy, policy.Rules[0], func(r signature.KeyRef) (map[string][]byte, error) {
				return map[string][]byte{r.Key: files[r.ConfigMap]}, nil
			}, logr.Discard())
			if err != nil {
				return err
			}
			client, err := p.g.ociClient(&p.registry)
			if err != nil {
				return err
			}
			art, err := client.Pull(cmd.Context(), args[0])
			if err != nil {
				return p.registry.explain(err)
			}
			if err := v.Verify(cmd.Context(), client, art); err != nil {
				var serr *signature.Error
				if errors.As(err, &serr) {
					return fmt.Errorf("%s: %s: %s", serr.Reason, serr.Image, serr.Detail)
				}
				return err
			}
			cmd.PrintErrf("osmctl: verified %s\n", art.Reference)
			_, err = fmt.Fprintln(cmd.OutOrStdout(), art.Reference)
			return err
		},
	}
	cmd.Flags().StringArrayVar(&keyFiles, "key", nil, "PEM public key file a signature may verify against (repeatable; any one suffices).")
	cmd.Flags().StringVar(&rootFile, "trusted-root", "", "Sigstore trusted_root.json whose certificate authorities may have issued the signing certificate.")
	cmd.Flags().StringVar(&keyless.Subject, "certificate-identity", "", "Subject alternative name (e-mail or URI) the signing certificate must name.")
	cmd.Flags().StringVar(&keyless.SubjectRegExp, "certificate-identity-regexp", "", "Regular expression the certificate's subject alternative name must match.")
	cmd.Flags().StringVar(&keyless.Issuer, "certificate-oidc-issuer", "", "OIDC issuer the certificate's issuer extension must name.")
	cmd.Flags().StringVar(&keyless.IssuerRegExp, "certificate-oidc-issuer-regexp", "", "Regular expression the certificate's OIDC issuer must match.")
	cmd.Flags().StringVar(&caFile, "notation-trust-store", "", "PEM CA certificates a Notation signature's chain must end at.")
	cmd.Flags().StringArrayVar(&notary.TrustedIdentities, "notation-identity", []string{"*"}, `Notation trusted identity ("x509.subject: CN=...,O=..."; repeatable); "*" trusts every certificate under the trust store.`)
	return cmd
}

// signNotation signs ref as the notation CLI does, with key and the chain in certFile.
func signNotation(cmd *cobra.Command, p *pluginCommon, client *oci.Client, ref string, key crypto.Signer, certFile string) error {
	if certFile == "" {
		return errors.New("--format notation needs --certificate: the key's certificate chain, leaf first, root last")
	}
	data, err := os.ReadFile(certFile)
	if err != nil {
		return fmt.Errorf("--certificate: %w", err)
	}
	ders, err := signature.ParseCertificates(data)
	if err != nil {
		return fmt.Errorf("--certificate %s: %w", certFile, err)
	}
	chain := make([]*x509.Certificate, len(ders))
	for i, d := range ders {
		if chain[i], err = x509.ParseCertificate(d); err != nil {
			return fmt.Errorf("--certificate %s: %w", certFile, err)
		}
	}
	pinned, err := signature.SignNotation(cmd.Context(), client, ref, key, chain)
	if err != nil {
		return p.registry.explain(err)
	}
	cmd.PrintErrf("osmctl: signed %s (Notation)\n", pinned)
	_, err = fmt.Fprintln(cmd.OutOrStdout(), pinned)
	return err
}
