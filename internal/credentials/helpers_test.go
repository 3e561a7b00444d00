package credentials

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/testca"
)

// testKey is a fixed 32-byte key: byte i of it is seed+i.
func testKey(seed byte) []byte {
	k := make([]byte, 32)
	for i := range k {
		k[i] = seed + byte(i)
	}
	return k
}

func keyring(t testing.TB, keys ...[]byte) *Keyring {
	t.Helper()
	k, err := NewKeyring(keys...)
	if err != nil {
		t.Fatalf("NewKeyring: %v", err)
	}
	return k
}

// newStore is a Store on a private Redis, sealing under testKey(1).
func newStore(t *testing.T) *Store {
	t.Helper()
	return &Store{RDB: redistest.Start(t).Client(), Keys: keyring(t, testKey(1))}
}

// newBook is a worker's Book on s's Redis; guard nil allows loopback.
func newBook(s *Store, guard *egress.Guard) *Book {
	if guard == nil {
		guard = &egress.Guard{AllowPrivate: true}
	}
	return &Book{Store: &Store{RDB: s.RDB, Keys: s.Keys}, Guard: guard, Base: guard.Client(),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// pair is a certificate (for host or client names) and its key, PEM.
type pair struct{ ca, cert, key string }

func issue(t testing.TB, names ...string) pair {
	t.Helper()
	is, err := testca.Issue(names...)
	if err != nil {
		t.Fatalf("testca: %v", err)
	}
	return pair{string(is.CA), string(is.Cert), string(is.Key)}
}

// expiredPair is a self-signed certificate that expired an hour ago.
func expiredPair(t testing.TB) pair {
	t.Helper()
	return selfSigned(t, time.Now().Add(-time.Hour))
}

// selfSigned is a self-signed client certificate valid until notAfter.
func selfSigned(t testing.TB, notAfter time.Time) pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "expired"},
		NotBefore: now.Add(-48 * time.Hour), NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	enc := func(typ string, b []byte) string { return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b})) }
	return pair{cert: enc("CERTIFICATE", der), key: enc("PRIVATE KEY", keyDER)}
}

// pemBody is the base64 text of a PEM block, its lines joined: what would
// show if a private key were stored in clear, reformatted or not.
func pemBody(t testing.TB, p string) []string {
	t.Helper()
	b, _ := pem.Decode([]byte(p))
	if b == nil {
		t.Fatalf("not PEM: %q", p)
		return nil
	}
	lines := bytes.Split(bytes.TrimSpace([]byte(p)), []byte("\n"))
	out := []string{string(b.Bytes)}
	for _, l := range lines[1 : len(lines)-1] {
		out = append(out, string(l))
	}
	return out
}

// everyValue reads every key of rdb and every value in it, whatever its
// type: the key names, string values, hash fields and values, set, list
// and sorted-set members.
func everyValue(t *testing.T, rdb redis.UniversalClient) map[string][]string {
	t.Helper()
	ctx := t.Context()
	out := map[string][]string{}
	iter := rdb.Scan(ctx, 0, "*", 100).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		vals := []string{k}
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			t.Fatalf("TYPE %s: %v", k, err)
		}
		switch typ {
		case "string":
			v, err := rdb.Get(ctx, k).Result()
			if err != nil {
				t.Fatalf("GET %s: %v", k, err)
			}
			vals = append(vals, v)
		case "hash":
			for f, v := range rdb.HGetAll(ctx, k).Val() {
				vals = append(vals, f, v)
			}
		case "set":
			vals = append(vals, rdb.SMembers(ctx, k).Val()...)
		case "list":
			vals = append(vals, rdb.LRange(ctx, k, 0, -1).Val()...)
		case "zset":
			vals = append(vals, rdb.ZRange(ctx, k, 0, -1).Val()...)
		default:
			t.Fatalf("key %s is a %s, which the scan does not read", k, typ)
		}
		out[k] = vals
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN: %v", err)
	}
	return out
}
