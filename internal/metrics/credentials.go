package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var descCredentials = prometheus.NewDesc("retryd_credentials_troubled",
	"Credentials an operator must look at, of every tenant: state=expiring (a certificate within 14 days of its notAfter) "+
		"or failing (its token endpoint failed several times in a row).", []string{"state"}, nil)

// CredentialSource counts the credentials expiring and failing.
type CredentialSource func(ctx context.Context) (expiring, failing int, err error)

// RegisterCredentials adds the credential series, read at scrape time.
func (m *Metrics) RegisterCredentials(read CredentialSource) {
	m.Registry.MustRegister(credentialSeries{read})
}

type credentialSeries struct{ read CredentialSource }

func (c credentialSeries) Describe(ch chan<- *prometheus.Desc) { ch <- descCredentials }

func (c credentialSeries) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	expiring, failing, err := c.read(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descCredentials, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(descCredentials, prometheus.GaugeValue, float64(expiring), "expiring")
	ch <- prometheus.MustNewConstMetric(descCredentials, prometheus.GaugeValue, float64(failing), "failing")
}
