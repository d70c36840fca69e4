#!/usr/bin/env python3
"""Writes config/kafkakeys.go: the names of every broker config and topic
config of Apache Kafka 3.9, read from Kafka's own source, each with the
ConfigDef (and file) it comes from.

    git clone https://github.com/apache/kafka && git -C kafka checkout 3.9.0
    scripts/kafkakeys.py /path/to/kafka | gofmt > config/kafkakeys.go

Kafka's broker ConfigDef is AbstractKafkaConfig.CONFIG_DEF, a merge of the
ConfigDefs of the classes in BROKER_DEFS below (KafkaConfig.configDef in
3.9); the broker configs that exist only as dynamic configs come from
QuotaConfigs.brokerQuotaConfigs (DynamicConfig.Broker); the topic configs
from LogConfig's CONFIG. The script reads the first argument of each
define/defineInternal call of those ConfigDefs and resolves Java string
constants, concatenations and ServerTopicConfigSynonyms.serverSynonym.
"""
import json, os, re, sys

root = sys.argv[1]
consts={}  # (Class, NAME) -> expr ; also by file
files={}
for dp,dn,fn in os.walk(root):
    if '/src/main/java' not in dp: continue
    for f in fn:
        if f.endswith('.java'):
            p=os.path.join(dp,f); files[f[:-5]]=files.get(f[:-5],[])+[p]
strre=re.compile(r'static\s+final\s+String\s+(\w+)\s*=\s*(.*?);',re.S)
raw={}
for cls,ps in files.items():
    for p in ps:
        src=open(p,encoding='utf-8',errors='replace').read()
        for m in strre.finditer(src):
            raw[(cls,m.group(1))]=m.group(2)
def resolve(cls,expr,depth=0):
    if depth>10: return None
    out=''
    for part in re.split(r'\s*\+\s*',expr.strip()):
        part=part.strip()
        if part.startswith('"'):
            m=re.fullmatch(r'"((?:[^"\\]|\\.)*)"',part)
            if not m: return None
            out+=m.group(1); continue
        m=re.fullmatch(r'(?:ServerTopicConfigSynonyms\.)?serverSynonym\((.*)\)',part)
        if m:
            t=resolve(cls,m.group(1),depth+1)
            return None if t is None or t not in SYN else out+SYN[t][0]
        if '.' in part:
            c,n=part.rsplit('.',1); c=c.split('.')[-1]
        else: c,n=cls,part
        e=raw.get((c,n))
        if e is None:
            cands=[k for k in raw if k[1]==n]
            if len(cands)==1: c=cands[0][0]; e=raw[cands[0]]
            else: return None
        v=resolve(c,e,depth+1)
        if v is None: return None
        out+=v
    return out
def args_first(src,i):
    # i at '(' ; return first arg text
    d=0;j=i
    while True:
        ch=src[j]
        if ch in '([{': d+=1
        elif ch in ')]}':
            d-=1
            if d==0: return src[i+1:j]
        elif ch==',' and d==1: return src[i+1:j]
        j+=1
def defines(cls,src):
    out=[]
    for m in re.finditer(r'\.\s*define(?:Internal)?\s*\(',src):
        i=m.end()-1
        a=args_first(src,i).strip()
        if a.startswith('new ConfigKey') : continue
        v=resolve(cls,a)
        out.append((a,v))
    return out
def path(cls,hint=None):
    ps=files[cls]
    if hint: ps=[p for p in ps if hint in p]
    assert len(ps)==1,(cls,ps)
    return ps[0]
SYN={}
src=open(path('ServerTopicConfigSynonyms')).read()
blk=src[src.index('ALL_TOPIC_CONFIG_SYNONYMS ='):src.index('Map<String, String> TOPIC_CONFIG_SYNONYMS')]
for m in re.finditer(r'(sameName|sameNameWithLogPrefix|sameNameWithLogCleanerPrefix|singleWithLogPrefix|singleWithLogCleanerPrefix|single|listWithLogPrefix)\((TopicConfig\.\w+)((?:,\s*(?:new ConfigSynonym\()?"[^"]+"(?:,\s*ConfigSynonym\.\w+)?\)?)*)\)',blk):
    f,t,rest=m.group(1),resolve('TopicConfig',m.group(2)),m.group(3)
    names=re.findall(r'"([^"]+)"',rest)
    pre={'sameName':'','single':'','sameNameWithLogPrefix':'log.','singleWithLogPrefix':'log.','listWithLogPrefix':'log.','sameNameWithLogCleanerPrefix':'log.cleaner.','singleWithLogCleanerPrefix':'log.cleaner.'}[f]
    SYN[t]=[pre+n for n in names] if names else [pre+t]
broker={};topic={}
BROKER_DEFS = srcs = ['RemoteLogManagerConfig','ZkConfigs','ServerConfigs','KRaftConfigs','SocketServerConfigs','ReplicationConfigs','GroupCoordinatorConfig','CleanerConfig','ShareGroupConfig','TransactionLogConfigs','TransactionStateManagerConfigs','QuorumConfig','MetricConfigs','QuotaConfigs','BrokerSecurityConfigs','DelegationTokenManagerConfigs','PasswordEncoderConfigs']
for cls in srcs:
    p=path(cls,'/main/'); src=open(p).read()
    if cls=='QuotaConfigs': src=src[src.index('CONFIG_DEF =  new ConfigDef()'):src.index('USER_AND_CLIENT_QUOTA_NAMES')]
    for a,v in defines(cls,src):
        if v is None: print('UNRESOLVED',cls,a,file=sys.stderr); continue
        broker.setdefault(v,cls+'.'+('configDef()' if cls=='RemoteLogManagerConfig' else 'CONFIG_DEF'))
p=path('QuotaConfigs'); src=open(p).read()
src=src[src.index('public static ConfigDef brokerQuotaConfigs'):src.index('public static ConfigDef userAndClientQuotaConfigs')]
for a,v in defines('QuotaConfigs',src):
    broker.setdefault(v,'QuotaConfigs.brokerQuotaConfigs')
p=path('LogConfig','storage/'); src=open(p).read()
i=src.index('SERVER_CONFIG_DEF = new ConfigDef()'); j=src.index('private static final LogConfigDef CONFIG')
for a,v in defines('LogConfig',src[i:j]):
    if v is None: print('UNRESOLVED LogConfig',a,file=sys.stderr); continue
    broker.setdefault(v,'LogConfig.SERVER_CONFIG_DEF')
k=src.index('static {',j); e=src.index('\n    }',k)
for a,v in defines('LogConfig',src[k:e]):
    if v is None: print('UNRESOLVED topic',a,file=sys.stderr); continue
    topic.setdefault(v,'LogConfig.CONFIG')
PATHS = {c: os.path.relpath(path(c, '/main/') if c != 'LogConfig' else path(c, 'storage/'), root) for c in srcs + ['LogConfig', 'QuotaConfigs']}


def go(names_by_source, var, doc):
    out = ['// %s' % doc, 'var %s = []kafkaKeySet{' % var]
    for src in sorted(names_by_source):
        cls = src.split('.')[0]
        out.append('\t{Source: "%s", File: "%s", Names: []string{' % (src, PATHS[cls]))
        for n in sorted(names_by_source[src]):
            out.append('\t\t"%s",' % n)
        out.append('\t}},')
    out.append('}')
    return '\n'.join(out)


def group(d):
    g = {}
    for k, v in d.items():
        g.setdefault(v, []).append(k)
    return g


print('''// Code generated by scripts/kafkakeys.py from Apache Kafka 3.9.0's source; DO NOT EDIT.

package config

// kafkaVersion is the Kafka release whose config names these are.
const kafkaVersion = "3.9"
''')
print(go(group(broker), 'kafkaBrokerKeys', 'kafkaBrokerKeys is every broker config of Kafka, by the ConfigDef that defines it.'))
print()
print(go(group(topic), 'kafkaTopicKeys', 'kafkaTopicKeys is every topic config of Kafka (LogConfig).'))
print()
print('// kafkaTopicSynonyms maps a topic config to the broker configs that give its')
print('// default, in precedence order (ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS).')
print('var kafkaTopicSynonyms = map[string][]string{')
for t in sorted(SYN):
    print('\t"%s": {%s},' % (t, ', '.join('"%s"' % s for s in SYN[t])))
print('}')
