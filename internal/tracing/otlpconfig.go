package tracing

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// defaultOTLPTimeout is how long one export request may take when
// OTEL_EXPORTER_OTLP_TIMEOUT does not say: the OTLP specification's 10 s.
const defaultOTLPTimeout = 10 * time.Second

// otlpConfig is what the OTEL_EXPORTER_OTLP_* variables ask of the
// exporter. The TRACES_ variable of each pair wins over the general one,
// as the OTLP exporter specification says.
type otlpConfig struct {
	url     string
	headers map[string]string
	// timeout bounds one request; 0 leaves only the caller's deadline.
	timeout time.Duration
	gzip    bool
	tls     *tls.Config
}

// otlpEnv reads the variable name with OTEL_EXPORTER_OTLP_TRACES_ first,
// then OTEL_EXPORTER_OTLP_; it returns the variable it found, for errors.
func otlpEnv(getenv func(string) string, name string) (value, variable string) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_" + name, "OTEL_EXPORTER_OTLP_" + name} {
		if s := strings.TrimSpace(getenv(v)); s != "" {
			return s, v
		}
	}
	return "", ""
}

// readOTLPConfig reads the exporter's variables for the traces URL
// endpoint (OTLPEndpoint). A value it cannot use is an error naming the
// variable; a header's value is never part of the message, since headers
// carry credentials.
func readOTLPConfig(getenv func(string) string, endpoint string) (otlpConfig, error) {
	c := otlpConfig{url: endpoint, timeout: defaultOTLPTimeout}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		_, v := otlpEnv(getenv, "ENDPOINT")
		shown := "the value"
		if err == nil {
			shown = fmt.Sprintf("%q", u.Redacted())
		}
		return c, fmt.Errorf("%s: %s is not an http:// or https:// URL", v, shown)
	}
	if h, v := otlpEnv(getenv, "HEADERS"); h != "" {
		if c.headers, err = parseOTLPHeaders(h); err != nil {
			return c, fmt.Errorf("%s: %w", v, err)
		}
	}
	if t, v := otlpEnv(getenv, "TIMEOUT"); t != "" {
		ms, err := strconv.Atoi(t)
		if err != nil || ms < 0 {
			return c, fmt.Errorf("%s: %q is not a whole number of milliseconds", v, t)
		}
		c.timeout = time.Duration(ms) * time.Millisecond
	}
	if z, v := otlpEnv(getenv, "COMPRESSION"); z != "" {
		switch strings.ToLower(z) {
		case "gzip":
			c.gzip = true
		case "none":
		default:
			return c, fmt.Errorf("%s: %q is neither gzip nor none", v, z)
		}
	}
	tc, err := readOTLPTLS(getenv)
	if err != nil {
		return c, err
	}
	if tc != nil && u.Scheme != "https" {
		return c, fmt.Errorf("OTLP endpoint %s: certificates are set, but the endpoint is not https", u.Redacted())
	}
	c.tls = tc
	return c, nil
}

// parseOTLPHeaders reads "k1=v1,k2=v2" with URL-encoded values, as the
// OTLP exporter specification writes them.
func parseOTLPHeaders(s string) (map[string]string, error) {
	h := map[string]string{}
	for i, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || !validHeaderName(k) {
			return nil, fmt.Errorf("entry %d is not key=value with a header name as key", i+1)
		}
		val, err := url.PathUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("the value of %s is not URL-encoded correctly", k)
		}
		h[k] = strings.TrimSpace(val)
	}
	return h, nil
}

// validHeaderName reports whether k is an HTTP token (RFC 9110).
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)
		if !ok {
			return false
		}
	}
	return true
}

// readOTLPTLS reads the CA certificate and the client certificate and key
// (PEM files); nil when none is set.
func readOTLPTLS(getenv func(string) string) (*tls.Config, error) {
	var tc *tls.Config
	if f, v := otlpEnv(getenv, "CERTIFICATE"); f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: %s holds no PEM certificate", v, f)
		}
		tc = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	cert, cv := otlpEnv(getenv, "CLIENT_CERTIFICATE")
	key, kv := otlpEnv(getenv, "CLIENT_KEY")
	switch {
	case cert == "" && key == "":
		return tc, nil
	case cert == "" || key == "":
		return nil, errors.New("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY go together: one is set without the other")
	}
	certPEM, err := os.ReadFile(cert)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cv, err)
	}
	keyPEM, err := os.ReadFile(key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kv, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// The error of X509KeyPair describes the PEM blocks, never the key.
		return nil, fmt.Errorf("%s and %s: %w", cv, kv, err)
	}
	if tc == nil {
		tc = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tc.Certificates = []tls.Certificate{pair}
	return tc, nil
}
