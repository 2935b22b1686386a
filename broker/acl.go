package broker

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rocketkv/rocketkv/acl"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// aclReloadInterval is how often the ACL file is read for edits (RocketMQ
// watches it every 500 ms).
const aclReloadInterval = time.Second

// refusedLogBurst bounds the log lines of refused requests per second.
const refusedLogBurst = 10

// aclRemarkPrefix starts the remark of a refused request, as RocketMQ's
// broker words it (the exception's class, then its message).
const aclRemarkPrefix = "org.apache.rocketmq.acl.common.AclException: "

// openACL loads the ACL file when aclEnable is set and starts watching it
// for edits; nil when access control is off.
func (b *Broker) openACL() (*acl.Guard, error) {
	if !b.cfg.AclEnable {
		return nil, nil
	}
	path, err := plainACLPath(b.cfg)
	if err != nil {
		return nil, fmt.Errorf("aclEnable: %w", err)
	}
	g, err := acl.Open(path, b.component("acl"))
	if err != nil {
		return nil, fmt.Errorf("aclEnable: %w", err)
	}
	b.goBackground("acl-reload", func(ctx context.Context) { g.Run(ctx, aclReloadInterval) })
	b.log.Info().Str("file", path).Msg("access control on: every request is checked against the ACL file")
	return g, nil
}

// plainACLPath is the plain ACL file: plainAclFile, else where RocketMQ
// reads it.
func plainACLPath(cfg configs.Broker) (string, error) {
	if cfg.PlainAclFile != "" {
		return cfg.PlainAclFile, nil
	}
	home := os.Getenv("ROCKETMQ_HOME")
	if home == "" {
		return "", fmt.Errorf("set plainAclFile, or ROCKETMQ_HOME for $ROCKETMQ_HOME/conf/plain_acl.yml")
	}
	return filepath.Join(home, "conf", "plain_acl.yml"), nil
}

// aclHandler checks every request against the ACL before next serves it.
type aclHandler struct {
	b     *Broker
	guard *acl.Guard
	next  remoting.Handler
}

// ServeCommand implements remoting.Handler.
func (h aclHandler) ServeCommand(ctx context.Context, conn *remoting.Conn, req *remoting.Command) {
	r := &acl.Request{Code: req.Code, Version: req.Version, Remote: remoteIP(conn.RemoteAddr()),
		Fields: req.ExtFields, Body: req.Body, Resources: aclResources(req)}
	if r.Fields == nil {
		r.Fields = map[string]string{}
	}
	if err := h.guard.Check(r); err != nil {
		h.b.refusedLog.Warn().Stringer("conn", conn).Int32("code", req.Code).Str("accessKey", r.Fields[acl.FieldAccessKey]).
			Str("reason", err.Error()).Msg("request refused by the ACL (sampled)")
		if !req.IsOneway() {
			_ = conn.Reply(req, remoting.NewResponse(req, remoting.SystemError, aclRemarkPrefix+err.Error()))
		}
		return
	}
	h.next.ServeCommand(ctx, conn, req)
}

// remoteIP is the client's address without its port; the zero Addr
// (which no white list admits) when it is not a TCP address.
func remoteIP(a net.Addr) netip.Addr {
	if t, ok := a.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(t.IP); ok {
			return ip.Unmap()
		}
	}
	return netip.Addr{}
}

// aclResources lists the topics and groups a request acts on with the
// permission it needs: for the request codes RocketMQ's plain ACL checks
// (PlainAccessResource.parse of 5.2), and for the reads and writes it
// leaves unchecked (lite pull, POP, reply, recall). Other codes are only
// authenticated.
func aclResources(req *remoting.Command) []acl.Resource {
	f := req.ExtFields
	var out []acl.Resource
	add := func(name string, p acl.Perm) {
		if name != "" {
			out = append(out, acl.Resource{Name: name, Perm: p})
		}
	}
	group := func(g string) {
		if g != "" {
			out = append(out, acl.GroupResource(g, acl.Sub))
		}
	}
	// A send to a retry topic is a consumer's send-back: it needs SUB on
	// the group the retry topic belongs to.
	send := func(topic string) {
		if strings.HasPrefix(topic, acl.RetryGroupTopicPrefix) {
			add(topic, acl.Sub)
			return
		}
		add(topic, acl.Pub)
	}
	// A consumer's read of a topic as a group: SUB on both.
	consume := func(topic, g string) {
		add(topic, acl.Sub)
		group(g)
	}
	// An ack or a change of invisible time names the topic the message
	// lives in: for a retried one the group's POP retry topic
	// (%RETRY%group_T, %RETRY%group+T, as the Java client sends it),
	// which is read as T; as a group name it would need SUB on a group
	// "group_T" that no account has.
	settle := func(topic, g string) {
		if t, ok := sendBackOriginTopic(strings.TrimSpace(topic), g); ok {
			add(t, acl.Sub)
		} else {
			add(topic, acl.Sub) // another group's retry topic: its group
		}
		group(g)
	}
	switch req.Code {
	case remoting.SendMessage, remoting.SendReplyMessage:
		send(f["topic"])
	case remoting.SendMessageV2, remoting.SendBatchMessage, remoting.SendReplyMessageV2:
		send(sendTopic(f))
	case remoting.RecallMessage:
		add(f["topic"], acl.Pub)
	case remoting.ConsumerSendMsgBack:
		// Beyond RocketMQ 5.3's plain ACL: Sub on the message's topic
		// (the processor refuses a message of another topic).
		if o := strings.TrimSpace(f["originTopic"]); o != "" {
			if t, ok := sendBackOriginTopic(o, f["group"]); !ok {
				add(o, acl.Sub) // another group's retry topic: its group
			} else if t != "" {
				add(t, acl.Sub)
			}
		}
		group(f["group"])
	case remoting.PullMessage, remoting.LitePullMessage:
		consume(f["topic"], f["consumerGroup"])
	case remoting.PopMessage, remoting.PeekMessage, remoting.Notification:
		// Beyond RocketMQ's plain ACL, which checks none of the POP
		// requests: a POP consumer reads as a pull consumer does.
		consume(f["topic"], f["consumerGroup"])
	case remoting.AckMessage, remoting.ChangeMessageInvisibleTime:
		settle(f["topic"], f["consumerGroup"])
	case remoting.BatchAckMessage:
		if body, err := pop.DecodeBatchAck(req.Body); err == nil {
			for _, a := range body.Acks {
				settle(a.Topic, a.ConsumerGroup)
			}
		}
	case remoting.QueryMessage:
		add(f["topic"], acl.Sub)
	case remoting.HeartBeat:
		for _, cd := range heartbeatConsumers(req.Body) {
			group(cd.GroupName)
			for _, s := range cd.SubscriptionDataSet {
				add(s.Topic, acl.Sub)
			}
		}
	case remoting.UnregisterClient, remoting.GetConsumerListByGroup:
		group(f["consumerGroup"])
	case remoting.UpdateConsumerOffset:
		group(f["consumerGroup"])
		add(f["topic"], acl.Sub)
	}
	return out
}
