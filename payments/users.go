package payments

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"

	"github.com/google/uuid"
)

// APIKeyPrefix starts every API key, so a leaked key is easy to recognise
// (and for secret scanners to find).
const APIKeyPrefix = "sk_"

// NewAPIKey returns a fresh API key: 256 random bits, base64url-encoded
// after APIKeyPrefix.
func NewAPIKey() string {
	return APIKeyPrefix + base64.RawURLEncoding.EncodeToString(randomBytes(32))
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return b
}

// HashAPIKey is what the database keeps of an API key: its SHA-256. A
// 256-bit random key needs no salt or slow hash: it cannot be guessed.
func HashAPIKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// CreateUser makes a user and returns its id and API key. The key is not
// stored, only its hash: this is the only time it is seen.
func (s *Service) CreateUser(ctx context.Context) (userID, apiKey string, err error) {
	userID, apiKey = uuid.NewString(), NewAPIKey()
	if err := s.ledger.CreateUser(ctx, userID, HashAPIKey(apiKey)); err != nil {
		return "", "", err
	}
	return userID, apiKey, nil
}

// Authenticate returns the user whose API key is apiKey, or
// ErrUnauthorized. Only the key's hash reaches the database, so the lookup
// leaks nothing about stored keys through its timing.
func (s *Service) Authenticate(ctx context.Context, apiKey string) (string, error) {
	if !strings.HasPrefix(apiKey, APIKeyPrefix) {
		return "", ErrUnauthorized
	}
	return s.ledger.UserByKeyHash(ctx, HashAPIKey(apiKey))
}

// HasUsers reports whether any user exists.
func (s *Service) HasUsers(ctx context.Context) (bool, error) { return s.ledger.HasUsers(ctx) }
