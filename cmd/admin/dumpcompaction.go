package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/commitlog"
)

// dumpCompactionLogCmd is mqadmin dumpCompactionLog: it reads a compaction
// log file (CommitLog records, RocketMQ's compacted-topic store) from the
// local disk and prints each message as RocketMQ's MessageExt.toString of
// a record decoded without its body.
func dumpCompactionLogCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "dumpCompactionLog",
		Short: "print the messages of a compaction log file (CommitLog records) on the local disk, as mqadmin dumpCompactionLog",
		Long: `dumpCompactionLog reads a file of RocketMQ CommitLog records, such as a
compaction log file of a RocketMQ broker (store/compaction/compactionLog/
<topic>/<queueId>/...) or a CommitLog segment, and prints a line per message:
RocketMQ's MessageExt.toString of the record read without its body (brokerName
and transactionId null, body=null, properties in Java HashMap order). No
broker is asked. The records end at the blank filler of a full file or at
the zero-filled tail of one still being written; a record that is cut short,
or bytes that are not a record, stop the dump with an error naming their
offset, after the messages before them are printed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("file") {
				return errors.New("miss dump log file name")
			}
			return dumpCompactionLog(cmd.OutOrStdout(), file)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the file to dump")
	return cmd
}

// dumpCompactionLog prints the records of the file at path, streaming it
// (a record's bytes are read at once, nothing more).
func dumpCompactionLog(out io.Writer, path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("file %s not exist", path)
	}
	if err != nil {
		return fmt.Errorf("dump %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("dump %s: %w", path, err)
	}
	if st.IsDir() {
		return fmt.Errorf("file %s is a directory", path)
	}
	size := st.Size()
	r := bufio.NewReaderSize(f, 1<<20)
	w := bufio.NewWriter(out)
	defer w.Flush()
	var rec []byte
	for pos := int64(0); pos < size; {
		bad := func(err error) error {
			_ = w.Flush()
			return fmt.Errorf("dump %s: record at offset %d: %w", path, pos, err)
		}
		var head [8]byte
		n, err := io.ReadFull(r, head[:min(8, size-pos)])
		if err != nil {
			return bad(fmt.Errorf("read: %w", err))
		}
		if n >= 4 && binary.BigEndian.Uint32(head[:]) == 0 || n < 4 && allZero(head[:n]) {
			return nil // the zero-filled, unwritten tail of a mapped file
		}
		if n < 8 {
			return bad(fmt.Errorf("%w: %d bytes left at the end of the file", commitlog.ErrTruncated, n))
		}
		recSize, err := commitlog.RecordSize(head[:])
		if errors.Is(err, commitlog.ErrBlank) {
			return nil // the filler at the end of a full file
		}
		if err != nil {
			return bad(fmt.Errorf("%w %#x", err, binary.BigEndian.Uint32(head[4:])))
		}
		if recSize < 8 || int64(recSize) > size-pos {
			return bad(fmt.Errorf("%w: TOTALSIZE %d, %d bytes left in the file", commitlog.ErrTruncated, recSize, size-pos))
		}
		if cap(rec) < int(recSize) {
			rec = make([]byte, recSize)
		}
		rec = rec[:recSize]
		copy(rec, head[:])
		if _, err := io.ReadFull(r, rec[8:]); err != nil {
			return bad(fmt.Errorf("read: %w", err))
		}
		m, err := commitlog.Decode(rec)
		if err != nil {
			return bad(err)
		}
		if _, err := fmt.Fprintln(w, messageExtString(&m)); err != nil {
			return fmt.Errorf("dump %s: %w", path, err)
		}
		pos += int64(recSize)
	}
	return nil
}

// messageExtString is RocketMQ's MessageExt.toString of a record decoded
// by its broker-side MessageDecoder without the body: no broker name, no
// transaction id, body null, the properties a HashMap of capacity 128.
func messageExtString(m *commitlog.Message) string {
	props := "null"
	if m.Properties != "" {
		var keys []string
		vals := map[string]string{}
		for k, v := range commitlog.PropertyPairs(strings.ToValidUTF8(m.Properties, "\uFFFD")) {
			if _, ok := vals[k]; !ok {
				keys = append(keys, k)
			}
			vals[k] = v
		}
		props = javaHashMapString(keys, vals, 128)
	}
	return fmt.Sprintf("MessageExt [brokerName=null, queueId=%d, storeSize=%d, queueOffset=%d, sysFlag=%d, bornTimestamp=%d, bornHost=%s, "+
		"storeTimestamp=%d, storeHost=%s, msgId=%s, commitLogOffset=%d, bodyCRC=%d, reconsumeTimes=%d, preparedTransactionOffset=%d, "+
		"toString()=Message{topic='%s', flag=%d, properties=%s, body=null, transactionId='null'}]",
		m.QueueID, m.StoreSize, m.QueueOffset, m.SysFlag, m.BornTimestamp, javaSocketAddress(m.BornHost),
		m.StoreTimestamp, javaSocketAddress(m.StoreHost), commitlog.MessageID(m.StoreHost, m.PhyOffset), m.PhyOffset,
		int32(m.BodyCRC), m.ReconsumeTimes, m.PreparedTransactionOffset,
		strings.ToValidUTF8(m.Topic, "\uFFFD"), m.Flag, props)
}

// javaSocketAddress writes a host as Java 8's InetSocketAddress.toString
// of an address built from its bytes: "/1.2.3.4:10911", an IPv6 address
// in full, unbracketed form ("/0:0:0:0:0:0:0:1:10911"; Java 14 and later
// put it in brackets). IPv4-mapped IPv6 bytes are an IPv4 address, as
// InetAddress.getByAddress makes them.
func javaSocketAddress(h netip.AddrPort) string {
	a := h.Addr().Unmap()
	port := strconv.Itoa(int(h.Port()))
	if a.Is4() {
		return "/" + a.String() + ":" + port
	}
	b := a.As16()
	groups := make([]string, 8)
	for i := range groups {
		groups[i] = strconv.FormatUint(uint64(binary.BigEndian.Uint16(b[2*i:])), 16)
	}
	return "/" + strings.Join(groups, ":") + ":" + port
}

// javaHashMapString writes a map as Java's HashMap.toString, in the order a
// HashMap created with capacity initialCap iterates it after keys were put
// in the order given: by bucket (the spread String.hashCode masked by the
// table size, which doubles past 3/4 full), then by insertion within a
// bucket. A bucket of more than 8 keys, which Java turns into a tree, is
// still listed in insertion order.
func javaHashMapString(keys []string, vals map[string]string, initialCap int) string {
	capacity := initialCap
	for len(keys) > capacity*3/4 {
		capacity *= 2
	}
	buckets := make([][]string, capacity)
	for _, k := range keys {
		h := javaStringHash(k)
		i := int((h ^ h>>16) & uint32(capacity-1))
		buckets[i] = append(buckets[i], k)
	}
	var sb strings.Builder
	sb.WriteByte('{')
	first := true
	for _, b := range buckets {
		for _, k := range b {
			if !first {
				sb.WriteString(", ")
			}
			first = false
			sb.WriteString(k)
			sb.WriteByte('=')
			sb.WriteString(vals[k])
		}
	}
	sb.WriteByte('}')
	return sb.String()
}

// javaStringHash is Java's String.hashCode: s*31^(n-1) + ... over the
// string's UTF-16 code units, as an unsigned 32-bit value.
func javaStringHash(s string) uint32 {
	var h uint32
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + uint32(0xD800+(r>>10))
			h = 31*h + uint32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + uint32(r)
	}
	return h
}

// allZero reports whether b holds only zero bytes.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
