package credentials

import (
	"context"
	"fmt"

	"github.com/retryd/retryd/internal/retry"
	"github.com/retryd/retryd/internal/sign"
)

// Signer is what signs tenant t's deliveries: its own signing secrets,
// newest first, or fallback (SIGNING_SECRETS) when it has none.
func (b *Book) Signer(ctx context.Context, t string, fallback *sign.Webhooks) (*sign.Webhooks, error) {
	s, err := b.snapshot(ctx, t, false)
	if err != nil {
		return nil, &retry.CredentialError{Err: err}
	}
	if len(s.signing) == 0 {
		return fallback, nil
	}
	b.mu.Lock()
	w := s.signer
	b.mu.Unlock()
	if w != nil {
		return w, nil
	}
	stored, err := decodeSecrets(s.signing)
	if err != nil {
		return nil, &retry.CredentialError{Err: err}
	}
	secrets := make([]sign.Secret, 0, len(stored))
	for _, st := range stored {
		key, err := b.Store.openSecret(t, st)
		if err != nil {
			return nil, &retry.CredentialError{Err: fmt.Errorf("signing secret %s cannot be read by this worker: %w", st.ID, err)}
		}
		secrets = append(secrets, sign.Secret{Kind: st.Type, Key: key})
	}
	w = sign.FromSecrets(secrets)
	b.mu.Lock()
	s.signer = w
	b.mu.Unlock()
	return w, nil
}
