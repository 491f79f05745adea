// A webhook receiver in Go that verifies both signatures of every delivery, on the standard library alone (the
// Standard Webhooks Go package verifies `webhook-signature` the same way): `WEBHOOK_SECRET=whsec_... go run .` in
// this folder, and register http://127.0.0.1:9000/hook.
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

var secret = os.Getenv("WEBHOOK_SECRET") // whsec_..., from registering the endpoint

const tolerance = 5 * time.Minute

// standardSignatureOk checks `webhook-signature`: base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}`
// under the base64-decoded secret, against each `v1,` signature given (two during a rotation).
func standardSignatureOk(header http.Header, body []byte) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return errors.New("the secret is not whsec_ and base64")
	}
	id, stamp := header.Get("webhook-id"), header.Get("webhook-timestamp")
	seconds, err := strconv.ParseInt(stamp, 10, 64)
	if err != nil || math.Abs(time.Since(time.Unix(seconds, 0)).Seconds()) > tolerance.Seconds() {
		return errors.New("webhook-timestamp is missing or too far from now")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + stamp + "."))
	mac.Write(body)
	expected := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, given := range strings.Fields(header.Get("webhook-signature")) {
		if hmac.Equal([]byte(strings.TrimPrefix(given, "v1,")), []byte(expected)) {
			return nil
		}
	}
	return errors.New("no signature matches")
}

// taskQueueSignatureOk checks the older scheme beside it: hex(HMAC-SHA256(secret as UTF-8, body)).
func taskQueueSignatureOk(header http.Header, body []byte) bool {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hmac.Equal([]byte(header.Get("X-Task-Queue-Signature")), []byte(hex.EncodeToString(mac.Sum(nil))))
}

func main() {
	http.HandleFunc("/hook", func(response http.ResponseWriter, request *http.Request) {
		body, _ := io.ReadAll(request.Body)
		var event struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(body, &event)
		ok := standardSignatureOk(request.Header, body) == nil && taskQueueSignatureOk(request.Header, body)
		verdict, status := "verified", http.StatusOK
		if !ok {
			verdict, status = "REJECTED", http.StatusBadRequest
		}
		fmt.Println(verdict, request.Header.Get("webhook-id"), event.Type)
		response.WriteHeader(status)
	})
	port := os.Getenv("PORT")
	if port == "" {
		port = "9000"
	}
	log.Fatal(http.ListenAndServe("127.0.0.1:"+port, nil))
}
