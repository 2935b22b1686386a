package acl

import "github.com/rocketkv/rocketkv/remoting"

// The environment variables rocketkv's tools read the ACL account from
// when no flag gives it (the secret stays off the command line).
const (
	EnvAccessKey = "ROCKETKV_ACCESS_KEY"
	EnvSecretKey = "ROCKETKV_SECRET_KEY"
)

// RequestSigner returns a remoting.ClientOptions.BeforeRequest that signs
// every request as the account accessKey/secretKey, as a RocketMQ client's
// ACL hook does; nil (no signing) when accessKey is empty.
func RequestSigner(accessKey, secretKey string) func(*remoting.Command) {
	if accessKey == "" {
		return nil
	}
	return func(req *remoting.Command) {
		req.ExtFields = SignedFields(req.ExtFields, req.Body, req.Version, accessKey, secretKey)
	}
}
