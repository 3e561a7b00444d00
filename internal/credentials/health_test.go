package credentials

import (
	"testing"
	"time"
)

func TestExpiringCertificatesAreReportedOncePerVersion(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	now := time.Now()
	soon, later := selfSigned(t, now.Add(3*24*time.Hour)), selfSigned(t, now.Add(90*24*time.Hour))
	for name, p := range map[string]pair{"soon": soon, "later": later} {
		if _, _, err := s.Put(ctx, "acme", name, &Spec{Type: MTLS, Certificate: p.cert, PrivateKey: p.key}, now); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Put(ctx, "globex", "bearer-soon", &Spec{Type: Bearer, Token: "t", ClientCertificate: &CertPair{soon.cert, soon.key}}, now); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	all, err := s.NewlyExpiring(ctx, now)
	for _, tr := range all {
		got[tr.Tenant+"/"+tr.Name] = tr.Expiring && tr.NotAfter.After(now)
	}
	if err != nil || len(got) != 2 || !got["acme/soon"] || !got["globex/bearer-soon"] {
		t.Errorf("NewlyExpiring = %+v, %v; want acme/soon and globex/bearer-soon", all, err)
	}
	if again, err := s.NewlyExpiring(ctx, now); len(again) != 0 || err != nil {
		t.Errorf("NewlyExpiring again = %+v, %v; want nothing new", again, err)
	}
	if all, _ := s.Troubles(ctx, now); len(all) != 2 {
		t.Errorf("Troubles = %+v; want the two still expiring", all)
	}
	if _, _, err := s.Put(ctx, "acme", "soon", &Spec{Type: MTLS, Certificate: soon.cert, PrivateKey: soon.key}, now); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.NewlyExpiring(ctx, now); len(again) != 1 || again[0].Name != "soon" {
		t.Errorf("after a new version: %+v, want soon reported again", again)
	}
}
