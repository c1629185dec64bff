package upgrade

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
)

// clientJWT builds the bearer token UpGrade's client routes want when client
// authentication is switched on: an HS256 JWT whose payload is
// {"APIKey": key}, signed with the client secret. It is small enough to write
// by hand, which spares the project a JWT dependency for one fixed claim set.
func clientJWT(key, secret string) string {
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	claims, _ := json.Marshal(struct {
		APIKey string `json:"APIKey"`
	}{key}) // marshalling a struct of one string cannot fail
	payload := base64.RawURLEncoding.EncodeToString(claims)
	signingInput := header + "." + payload
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(signingInput))
	return signingInput + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}
