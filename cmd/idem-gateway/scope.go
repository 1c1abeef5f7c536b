package main

import (
	"encoding/base64"
	"strings"
)

// authSchemes are the HTTP authentication schemes of IANA's registry, as
// spelt there: the spelling an Authorization value's scheme is hashed in,
// so that a client that sends the registered spelling keeps its scope.
var authSchemes = []string{
	"Basic", "Bearer", "Concealed", "Digest", "DPoP", "GNAP", "HOBA", "Mutual",
	"Negotiate", "OAuth", "PrivateToken", "SCRAM-SHA-1", "SCRAM-SHA-256", "vapid",
}

// canonicalAuthorization is an Authorization value with its scheme in one
// spelling (auth-schemes are case-insensitive, RFC 9110 §11.1) and one
// space before the credentials, which stay as sent. A value without
// credentials after a scheme is returned as is: it may be a bare token,
// whose case matters. It returns why the credentials cannot scope keys
// ("" when they can): base64 in another spelling than its one
// (credentialAmbiguity).
func canonicalAuthorization(v string) (string, string) {
	i := strings.IndexAny(v, " \t")
	if i <= 0 {
		return v, ""
	}
	scheme, creds := v[:i], strings.TrimLeft(v[i:], " \t")
	canon := ""
	for _, s := range authSchemes {
		if strings.EqualFold(scheme, s) {
			canon = s
			break
		}
	}
	if canon == "" {
		canon = titleASCII(scheme)
	}
	if why := credentialAmbiguity(canon, creds); why != "" {
		return "", why
	}
	if canon == scheme && v[i] == ' ' && len(v)-len(creds) == i+1 {
		return v, "" // the common case: no allocation
	}
	return canon + " " + creds, ""
}

// credentialAmbiguity returns why creds, the credentials of an
// Authorization value with scheme, have more spellings than one to an
// upstream ("" when they have one). Base64 leaves bits unused when the
// bytes do not fill its last group, and decoders ignore them (and, the
// lenient ones, padding, whitespace and the other alphabet): one
// credential, many scopes. So Basic credentials must be base64 in its one
// spelling (RFC 4648 §3.5), and so must every part of a token that is a
// JWS or JWE (RFC 7515 §7.1) in base64url; an opaque token is as sent.
func credentialAmbiguity(scheme, creds string) string {
	switch {
	case scheme == "Basic":
		if _, err := base64.StdEncoding.Strict().DecodeString(creds); err != nil {
			return "the Basic credentials are not base64 in its one spelling (padded, no unused bits set)"
		}
	case jose(creds):
		for _, part := range strings.Split(creds, ".") {
			if _, err := base64.RawURLEncoding.Strict().DecodeString(part); err != nil {
				return "the " + scheme + " token is a JWS or JWE whose parts are not base64url in its one spelling (unpadded, no unused bits set)"
			}
		}
	}
	return ""
}

// jose reports whether token is shaped like a JOSE compact serialisation:
// three (JWS) or five (JWE) parts separated by dots, the first a JSON
// object in base64 as the most lenient library reads it (either alphabet,
// padding ignored).
func jose(token string) bool {
	if n := strings.Count(token, "."); n != 2 && n != 4 || len(token) < 4 {
		return false
	}
	var head [4]byte
	for i := range head {
		switch c := token[i]; c {
		case '+':
			head[i] = '-'
		case '/':
			head[i] = '_'
		default:
			head[i] = c
		}
	}
	var b [3]byte
	if _, err := base64.RawURLEncoding.Decode(b[:], head[:]); err != nil {
		return false
	}
	obj := strings.TrimLeft(string(b[:]), " \t\r\n")
	return obj != "" && obj[0] == '{'
}

// titleASCII is s with its first letter upper-case and the rest lower,
// ASCII letters only: an unregistered scheme's one spelling.
func titleASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case i == 0 && 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		case i > 0 && 'A' <= c && c <= 'Z':
			b[i] = c - 'A' + 'a'
		}
	}
	return string(b)
}

// credentialHeader reports whether a header's value is a credential a
// client cannot guess, so its hash may scope keys: Authorization. Any
// other header must be declared (scope.credential_header) or trusted
// (scope.trusted_header).
func credentialHeader(name string) bool {
	return strings.EqualFold(name, "Authorization")
}
