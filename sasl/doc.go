// Package sasl authenticates ZooKeeper clients over SASL, as ZooKeeper's client port does with
// op 102 (GetSASLRequest / SetSASLResponse token exchanges).
//
// A server offers one mechanism, chosen as ZooKeeper chooses it from the JAAS login section it
// is given (Server by default): DIGEST-MD5 (RFC 2831, qop auth, realm "zk-sasl-md5", service
// "zookeeper") with the passwords of the section's user_NAME options, or GSSAPI (Kerberos) when
// the section logs the server in with a Krb5LoginModule. A finished exchange yields the client's
// authorization id, canonicalized as ZooKeeper's SaslServerCallbackHandler does, which the
// server adds as the identity sasl:<id>.
//
// The package does no I/O beyond reading the files a caller names (ReadJAAS); an Exchange is
// used by one goroutine at a time. It uses Go's crypto/md5, crypto/hmac and crypto/rand for the
// primitives; the DIGEST-MD5 code is only the protocol around them.
package sasl
