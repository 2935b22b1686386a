package broker

import (
	"errors"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// TestParseSendHeaderForms reads the same header in SEND_MESSAGE's long
// names and SEND_MESSAGE_V2's letters, and names the long field in errors
// of either form.
func TestParseSendHeaderForms(t *testing.T) {
	long := map[string]string{
		"producerGroup": "pg", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "3", "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "7",
		"properties": "TAGS\x01a\x02", "reconsumeTimes": "2", "maxReconsumeTimes": "16", "batch": "false",
	}
	letters := map[string]string{}
	for k, v := range long {
		letters[sendV2Letters[k]] = v
	}
	want, err := parseSendHeader(&remoting.Command{Code: remoting.SendMessage, ExtFields: long})
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseSendHeader(&remoting.Command{Code: remoting.SendMessageV2, ExtFields: letters})
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("V2 header parsed as %+v, long form as %+v", got, want)
	}
	if want.queueID != 3 || want.flag != 7 || !want.hasMaxReconsumeTimes || want.maxReconsumeTimes != 16 || want.topic != "T" {
		t.Fatalf("parsed %+v", want)
	}

	letters["e"] = "x"
	_, err = parseSendHeader(&remoting.Command{Code: remoting.SendMessageV2, ExtFields: letters})
	var fe *remoting.FieldError
	if !errors.As(err, &fe) || fe.Field != "queueId" || !errors.Is(err, remoting.ErrBadField) {
		t.Fatalf("bad queueId in a V2 header: %v", err)
	}
	delete(letters, "a")
	_, err = parseSendHeader(&remoting.Command{Code: remoting.SendMessageV2, ExtFields: letters})
	if err == nil || !strings.Contains(err.Error(), `"producerGroup"`) || !errors.Is(err, remoting.ErrMissingField) {
		t.Fatalf("missing producerGroup in a V2 header: %v", err)
	}
}
