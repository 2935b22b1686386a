package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// kvHeader is the header of PUT_KV_CONFIG (with a value), GET_KV_CONFIG
// and DELETE_KV_CONFIG.
func kvHeader(namespace, key string, value *string) remoting.Header {
	h := remoting.Header{"namespace": namespace, "key": key}
	if value != nil {
		h["value"] = *value
	}
	return h
}

// updateKvConfigCmd is mqadmin updateKvConfig.
func updateKvConfigCmd(g *globals) *cobra.Command {
	var namespace, key, value string
	cmd := &cobra.Command{
		Use:   "updateKvConfig",
		Short: "create or update a KV config item on every name server of -n (PUT_KV_CONFIG)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			namespace, key, value = strings.TrimSpace(namespace), strings.TrimSpace(key), strings.TrimSpace(value)
			if err := g.onEveryNamesrv(cmd.Context(), remoting.PutKVConfig, kvHeader(namespace, key, &value)); err != nil {
				return fmt.Errorf("put %s=%s in namespace %s: %w", key, value, namespace, err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "create or update kv config to namespace success.")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&namespace, "namespace", "s", "", "the namespace")
	f.StringVarP(&key, "key", "k", "", "the key")
	f.StringVarP(&value, "value", "v", "", "the value")
	for _, name := range []string{"namespace", "key", "value"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// deleteKvConfigCmd is mqadmin deleteKvConfig.
func deleteKvConfigCmd(g *globals) *cobra.Command {
	var namespace, key string
	cmd := &cobra.Command{
		Use:   "deleteKvConfig",
		Short: "delete a KV config item from every name server of -n (DELETE_KV_CONFIG)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			namespace, key = strings.TrimSpace(namespace), strings.TrimSpace(key)
			if err := g.onEveryNamesrv(cmd.Context(), remoting.DeleteKVConfig, kvHeader(namespace, key, nil)); err != nil {
				return fmt.Errorf("delete %s from namespace %s: %w", key, namespace, err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "delete kv config from namespace success.")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&namespace, "namespace", "s", "", "the namespace")
	f.StringVarP(&key, "key", "k", "", "the key")
	_ = cmd.MarkFlagRequired("namespace")
	_ = cmd.MarkFlagRequired("key")
	return cmd
}

// updateOrderConfCmd is mqadmin updateOrderConf: a topic's order config
// in the name servers' ORDER_TOPIC_CONFIG namespace, read from one name
// server, written to or deleted from every one.
func updateOrderConfCmd(g *globals) *cobra.Command {
	var topic, conf, method string
	cmd := &cobra.Command{
		Use:   "updateOrderConf",
		Short: "get, put or delete a topic's order config on the name servers (GET/PUT/DELETE_KV_CONFIG, namespace ORDER_TOPIC_CONFIG)",
		Long: `updateOrderConf reads (-m get), writes (-m put -v "broker-a:4;broker-b:4") or
deletes (-m delete) a topic's order config, as mqadmin updateOrderConf. The
name servers put it in the topic's route as orderTopicConf when their
orderMessageEnable is true.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			topic, conf = strings.TrimSpace(topic), strings.TrimSpace(conf)
			w := cmd.OutOrStdout()
			switch strings.TrimSpace(method) {
			case "get":
				resp, err := g.invokeNamesrv(cmd.Context(), remoting.GetKVConfig, kvHeader(namesrv.OrderTopicConfigNamespace, topic, nil), nil)
				if err != nil {
					return fmt.Errorf("get the order config of %s: %w", topic, err)
				}
				fmt.Fprintf(w, "get orderConf success. topic=[%s], orderConf=[%s]\n", topic, resp.ExtFields["value"])
			case "put":
				if conf == "" {
					return fmt.Errorf("please set orderConf with option -v")
				}
				if err := g.onEveryNamesrv(cmd.Context(), remoting.PutKVConfig, kvHeader(namesrv.OrderTopicConfigNamespace, topic, &conf)); err != nil {
					return fmt.Errorf("put the order config of %s: %w", topic, err)
				}
				fmt.Fprintf(w, "update orderConf success. topic=[%s], orderConf=[%s]\n", topic, conf)
			case "delete":
				if err := g.onEveryNamesrv(cmd.Context(), remoting.DeleteKVConfig, kvHeader(namesrv.OrderTopicConfigNamespace, topic, nil)); err != nil {
					return fmt.Errorf("delete the order config of %s: %w", topic, err)
				}
				fmt.Fprintf(w, "delete orderConf success. topic=[%s]\n", topic)
			default:
				return fmt.Errorf("-m %q: want get, put or delete", method)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic name")
	f.StringVarP(&conf, "orderConf", "v", "", `the order config, "brokerName1:num;brokerName2:num" (for put)`)
	f.StringVarP(&method, "method", "m", "", "get, put or delete")
	_ = cmd.MarkFlagRequired("topic")
	_ = cmd.MarkFlagRequired("method")
	return cmd
}
