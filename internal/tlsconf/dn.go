package tlsconf

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"strings"
	"unicode/utf16"
)

// SubjectDN returns the certificate's subject as Java's X500Principal.getName() prints it (RFC
// 2253): ZooKeeper's x509 identity of a client. The RDNs come last first, separated by commas;
// the values of a multi-valued RDN are joined by "+" in the order the certificate stores them.
// CN, C, L, ST, O, OU, STREET, DC and UID are named by keyword, any other attribute by its OID
// with its DER value in hex after "#"; the characters , = + < > # ; " \ are escaped with a
// backslash, as are leading and trailing blanks.
func SubjectDN(cert *x509.Certificate) (string, error) {
	return FormatDN(cert.RawSubject)
}

// attrValue and rdnSET mirror the DER of a distinguished name, keeping each value's own tag.
type attrValue struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

type rdnSET []attrValue

// FormatDN formats a DER-encoded distinguished name (a certificate's RawSubject) as SubjectDN.
func FormatDN(der []byte) (string, error) {
	var seq []rdnSET
	rest, err := asn1.Unmarshal(der, &seq)
	if err != nil {
		return "", err
	}
	if len(rest) > 0 {
		return "", errors.New("tlsconf: trailing data after the distinguished name")
	}
	var b strings.Builder
	for i := len(seq) - 1; i >= 0; i-- {
		if i < len(seq)-1 {
			b.WriteByte(',')
		}
		for j, av := range seq[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			writeAVA(&b, av)
		}
	}
	return b.String(), nil
}

// rfc2253Keywords are the attribute types Java names by keyword in RFC 2253 output.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// DER string tags Java prints as text.
const (
	tagUTF8      = 12
	tagPrintable = 19
	tagT61       = 20
	tagIA5       = 22
	tagGeneral   = 27
	tagBMP       = 30
)

func writeAVA(b *strings.Builder, av attrValue) {
	oid := av.Type.String()
	kw, named := rfc2253Keywords[oid]
	if !named {
		kw = oid
	}
	b.WriteString(kw)
	b.WriteByte('=')
	v := av.Value
	text, isString := "", v.Class == asn1.ClassUniversal
	if isString {
		switch v.Tag {
		case tagUTF8, tagPrintable, tagT61, tagIA5, tagGeneral:
			text = string(v.Bytes)
		case tagBMP:
			text = decodeBMP(v.Bytes)
		default:
			isString = false
		}
	}
	if !named || !isString {
		b.WriteByte('#')
		b.WriteString(hex.EncodeToString(v.FullBytes))
		return
	}
	var esc strings.Builder
	for _, r := range text {
		switch {
		case strings.ContainsRune(",=+<>#;\"\\", r):
			esc.WriteByte('\\')
			esc.WriteRune(r)
		case r == 0:
			esc.WriteString(`\00`)
		default:
			esc.WriteRune(r)
		}
	}
	s := esc.String()
	// Blanks (and carriage returns) at either end are escaped.
	lead := 0
	for lead < len(s) && (s[lead] == ' ' || s[lead] == '\r') {
		lead++
	}
	trail := len(s)
	for trail > lead && (s[trail-1] == ' ' || s[trail-1] == '\r') {
		trail--
	}
	for i := 0; i < len(s); i++ {
		if i < lead || i >= trail {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
}

func decodeBMP(raw []byte) string {
	u := make([]uint16, 0, len(raw)/2)
	for i := 0; i+1 < len(raw); i += 2 {
		u = append(u, uint16(raw[i])<<8|uint16(raw[i+1]))
	}
	return string(utf16.Decode(u))
}
