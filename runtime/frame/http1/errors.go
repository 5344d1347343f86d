package http1

import "strconv"

// Error is a message the codec rejects: Status is the response a server
// gives it (400, 413, 414, 431, 501, 505, 417), Reason says what was wrong.
// After an Error the connection's framing cannot be trusted: answer and
// close it (AppendError writes such an answer).
type Error struct {
	Status int
	Reason string
}

func (e *Error) Error() string {
	return "http1: " + strconv.Itoa(e.Status) + " " + StatusText(e.Status) + ": " + e.Reason
}

// The errors the decoders return. They are values, so that a rejection
// allocates nothing; compare with errors.As and read Status.
var (
	errBareLF          = &Error{400, "bare LF where CRLF is required"}
	errBareCR          = &Error{400, "CR not followed by LF"}
	errObsFold         = &Error{400, "obsolete line folding"}
	errNoColon         = &Error{400, "field line without a colon"}
	errFieldName       = &Error{400, "invalid field name (whitespace before the colon, or a non-token character)"}
	errFieldValue      = &Error{400, "control character in a field value"}
	errTooManyFields   = &Error{431, "too many header fields"}
	errHeadTooLarge    = &Error{431, "request header block too large"}
	errLineTooLong     = &Error{414, "request line too long"}
	errRequestLine     = &Error{400, "malformed request line"}
	errMethod          = &Error{400, "invalid method"}
	errTarget          = &Error{400, "invalid request target"}
	errVersion         = &Error{400, "malformed HTTP version"}
	errVersionNotSupp  = &Error{505, "HTTP version not supported"}
	errNoHost          = &Error{400, "HTTP/1.1 request without Host"}
	errManyHosts       = &Error{400, "more than one Host field"}
	errBadHost         = &Error{400, "invalid Host field"}
	errContentLength   = &Error{400, "invalid Content-Length"}
	errDiffLengths     = &Error{400, "differing Content-Length values"}
	errLengthAndTE     = &Error{400, "both Content-Length and Transfer-Encoding"}
	errTE10            = &Error{400, "Transfer-Encoding in an HTTP/1.0 request"}
	errTEUnknown       = &Error{501, "transfer coding not implemented (only chunked is)"}
	errTENotLast       = &Error{400, "chunked is not the last transfer coding"}
	errTETwice         = &Error{400, "chunked applied more than once"}
	errExpect          = &Error{417, "expectation other than 100-continue"}
	errBodyTooLarge    = &Error{413, "body too large"}
	errChunkSize       = &Error{400, "invalid chunk size"}
	errChunkLine       = &Error{400, "chunk size line too long"}
	errChunkEnd        = &Error{400, "chunk data not followed by CRLF"}
	errTrailerTooLarge = &Error{431, "trailer section too large"}
	errStatusLine      = &Error{502, "malformed status line"}
	errResponseHead    = &Error{502, "response header block too large"}
	errResponseLength  = &Error{502, "invalid Content-Length in a response"}
)

// StatusText returns the reason phrase of the status codes this package and
// its servers use, and "Unknown" for others.
func StatusText(code int) string {
	switch code {
	case 100:
		return "Continue"
	case 101:
		return "Switching Protocols"
	case 200:
		return "OK"
	case 201:
		return "Created"
	case 204:
		return "No Content"
	case 206:
		return "Partial Content"
	case 301:
		return "Moved Permanently"
	case 302:
		return "Found"
	case 304:
		return "Not Modified"
	case 400:
		return "Bad Request"
	case 403:
		return "Forbidden"
	case 404:
		return "Not Found"
	case 405:
		return "Method Not Allowed"
	case 408:
		return "Request Timeout"
	case 411:
		return "Length Required"
	case 413:
		return "Content Too Large"
	case 414:
		return "URI Too Long"
	case 416:
		return "Range Not Satisfiable"
	case 417:
		return "Expectation Failed"
	case 431:
		return "Request Header Fields Too Large"
	case 500:
		return "Internal Server Error"
	case 501:
		return "Not Implemented"
	case 502:
		return "Bad Gateway"
	case 503:
		return "Service Unavailable"
	case 504:
		return "Gateway Timeout"
	case 505:
		return "HTTP Version Not Supported"
	}
	return "Unknown"
}
