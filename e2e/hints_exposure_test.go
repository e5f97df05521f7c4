// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/hints"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store/pgtest"
)

// testToken is the bearer token the hints endpoint accepts in these
// tests; it must appear in no log line and no answer.
const testToken = "e2e-hints-token-7f3a9c" //nolint:gosec // G101: a made-up token, which must appear in no log line

// secureHints is the hints endpoint as the extension README's secure
// configuration serves it: over TLS, with a certificate for 127.0.0.1 made
// for the test, to clients with the token of bearertokenauth/hints, read
// from a file.
type secureHints struct {
	base    string    // https://127.0.0.1:port
	section string    // the processor's hints_extension, indented by four spaces
	auth    extension // the authenticator
	ext     extension // the errorownership_hints extension
	roots   *x509.CertPool
}

func newSecureHints(t *testing.T) secureHints {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile, roots := selfSigned(t, dir)
	tokenFile := filepath.Join(dir, "hints-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600))
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	return secureHints{
		base:    "https://" + addr,
		section: "    hints_extension: errorownership_hints",
		ext: extension{id: "errorownership_hints", config: fmt.Sprintf(`    endpoint: %s
    read_header_timeout: 5s
    tls:
      cert_file: %s
      key_file: %s
    auth:
      authenticator: bearertokenauth/hints`, addr, certFile, keyFile)},
		auth:  extension{id: "bearertokenauth/hints", config: "    filename: " + tokenFile},
		roots: roots,
	}
}

// httpClient trusts the endpoint's certificate.
func (s secureHints) httpClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.roots}}}
}

// selfSigned writes to dir a certificate for 127.0.0.1 that is its own CA,
// and its key, and returns a pool that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "errorownership e2e hints"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "hints.crt"), filepath.Join(dir, "hints.key")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

// fetch GETs checkout's hints from base with hc, with the given
// Authorization header unless empty, and returns the answer and its body.
func fetch(t *testing.T, hc *http.Client, base, authorization string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+ownership.HintsPath+"?service=checkout", nil)
	require.NoError(t, err)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, string(body), nil
}

// checkRevealsNothing fails if an answer shows any of leaks, or a trace
// of what failed inside, or names the server software.
func checkRevealsNothing(t *testing.T, res *http.Response, body string, leaks ...string) {
	t.Helper()
	leaks = append(leaks, testToken, testPassword, "goroutine", ".go:", "authorization header", "does not match")
	for _, leak := range leaks {
		assert.NotContains(t, strings.ToLower(body), strings.ToLower(leak), "the answer shows %q", leak)
	}
	for _, h := range []string{"Server", "X-Powered-By", "Via"} {
		assert.Empty(t, res.Header.Values(h), "the answer names its server in %s", h)
	}
}

// checkLogHidesToken fails if the collector logged the token.
func checkLogHidesToken(t *testing.T, c *collector) {
	t.Helper()
	if strings.Contains(c.Log(), testToken) {
		t.Error("the collector log shows the bearer token")
	}
}

// TestHintsOverTLSWithAuth runs the built collector with the hints
// endpoint over TLS behind bearertokenauth, as the processor README's
// secure configuration does, and reads it with the hooks' own client as a
// service would: only a client with the token over TLS is served, and a
// refusal says nothing of why.
func TestHintsOverTLSWithAuth(t *testing.T) {
	bin := buildCollector(t)
	s := newSecureHints(t)
	c := startCollectorWith(t, bin, defaultProcessor+"\n"+s.section, s.auth, s.ext)
	// The coincidental story teaches the model that checkout tolerates
	// recommendations failing: what a served client must see.
	for _, td := range scenarioRequests(t, "coincidental") {
		c.post(t, td)
	}

	plain := "http" + strings.TrimPrefix(s.base, "https")
	tests := []struct {
		name   string
		base   string
		header string // the Authorization header; "" for none
		code   int
	}{
		{"no credentials", s.base, "", http.StatusUnauthorized},
		{"a wrong token", s.base, "Bearer not-" + testToken, http.StatusUnauthorized},
		{"the token without its scheme", s.base, testToken, http.StatusUnauthorized},
		{"the token as Basic", s.base, "Basic " + testToken, http.StatusUnauthorized},
		// Go's TLS server answers plain HTTP with its own 400.
		{"the token over plain HTTP to the TLS port", plain, "Bearer " + testToken, http.StatusBadRequest},
		{"the token", s.base, "Bearer " + testToken, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, body, err := fetch(t, s.httpClient(), tt.base, tt.header)
			require.NoError(t, err)
			assert.Equal(t, tt.code, res.StatusCode, "%s", body)
			checkRevealsNothing(t, res, body)
			if tt.code != http.StatusOK {
				assert.NotContains(t, body, "checkout", "a refusal shows hints")
			}

			// The hooks' client, as a service sets it up.
			opts := []hints.Option{hints.WithHTTPClient(s.httpClient())}
			if tt.header != "" {
				opts = append(opts, hints.WithHeader("Authorization", tt.header))
			}
			h := hints.New(tt.base, "checkout", opts...)
			if tt.code != http.StatusOK {
				_, err := h.Refresh(context.Background())
				require.Error(t, err)
				assert.Contains(t, err.Error(), strconv.Itoa(tt.code))
				_, ok := h.Hints()
				assert.False(t, ok, "no hints: the safe defaults apply")
				return
			}
			require.Eventually(t, func() bool {
				_, err := h.Refresh(context.Background())
				return err == nil && h.Mode("POST /checkout", "recommendations", "GET /recommendations") == ownership.ModeFailOpen
			}, time.Minute, 200*time.Millisecond, "recommendations never became fail_open in the hints served over TLS")
		})
	}
	checkLogHidesToken(t, c)
}

// TestHintsWithTheDatabaseDown runs the built collector with a store it
// cannot read and the secure hints endpoint: an authorised client gets a
// plain 503 that names neither the database nor what failed, and the
// hooks' client keeps the safe defaults; once the database answers, the
// hints are served.
func TestHintsWithTheDatabaseDown(t *testing.T) {
	bin := buildCollector(t)
	tests := []struct {
		name string
		// dsn returns the store's DSN, and a function that brings the
		// database up, or nil.
		dsn func(t *testing.T) (string, func())
	}{
		{"nothing listening", func(t *testing.T) (string, func()) {
			return fmt.Sprintf("postgres://collector:%s@127.0.0.1:%d/stats?sslmode=disable", testPassword, freePort(t)), nil
		}},
		{"a server that never answers", func(t *testing.T) (string, func()) {
			return fmt.Sprintf("postgres://collector:%s@127.0.0.1:%d/stats?sslmode=disable", testPassword, pgtest.Unresponsive(t)), nil
		}},
		{"a cluster stopped, then started", func(t *testing.T) (string, func()) {
			cluster := pgtest.Start(t)
			ctx := context.Background()
			require.NoError(t, cluster.Stop(ctx))
			return cluster.DSN() + " password=" + testPassword, func() { require.NoError(t, cluster.Start(ctx)) }
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dsn, up := tt.dsn(t)
			pc, err := pgx.ParseConfig(dsn)
			require.NoError(t, err)
			leaks := []string{pc.Host, ":" + strconv.Itoa(int(pc.Port)), pc.User, pc.Database, "postgres", "dial", "connect", "refused", "timeout", "deadline", "sqlstate"}

			s := newSecureHints(t)
			// model_refresh bounds how long a hints request waits for a
			// database that does not answer.
			c := startCollectorWith(t, bin, storeProcessor+"\n"+s.section, storeExtension(dsn, "    model_refresh: 1s"), s.auth, s.ext)
			res, body, err := fetch(t, s.httpClient(), s.base, "Bearer "+testToken)
			require.NoError(t, err)
			assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "%s", body)
			assert.JSONEq(t, `{"error":"the edge model cannot be read now; keep the last hints or the safe defaults"}`, body)
			checkRevealsNothing(t, res, body, leaks...)

			h := hints.New(s.base, "checkout", hints.WithHTTPClient(s.httpClient()), hints.WithHeader("Authorization", "Bearer "+testToken))
			_, err = h.Refresh(context.Background())
			require.ErrorContains(t, err, "503")
			assert.Equal(t, ownership.ModeUnknown, h.Mode("POST /checkout", "recommendations", ""), "the safe defaults")
			assert.Equal(t, hooks.DefaultLimits(), h.BudgetLimits(), "the safe defaults")

			if up != nil {
				up()
				require.Eventually(t, func() bool {
					_, err := h.Refresh(context.Background())
					return err == nil
				}, time.Minute, 200*time.Millisecond, "the hints, once the database answers")
			}
			checkLog(t, c.Log())
			checkLogHidesToken(t, c)
		})
	}
}
