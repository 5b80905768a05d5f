import struct, numpy as np
def parse(path):
    b = open(path,'rb').read()
    assert b[:4]==b'E5S1'
    p=4
    def i32():
        nonlocal p; v=struct.unpack_from('<i',b,p)[0]; p+=4; return v
    def u32():
        nonlocal p; v=struct.unpack_from('<I',b,p)[0]; p+=4; return v
    def u64():
        nonlocal p; v=struct.unpack_from('<Q',b,p)[0]; p+=8; return v
    def f32():
        nonlocal p; v=struct.unpack_from('<f',b,p)[0]; p+=4; return v
    def u16():
        nonlocal p; v=struct.unpack_from('<H',b,p)[0]; p+=2; return v
    ver=u32()
    hp=dict(H=i32(),NL=i32(),NH=i32(),FF=i32(),VOC=i32(),MAXP=i32(),TVS=i32(),eps=f32(),qk=i32())
    n=i32(); bos,eos,pad,unk=i32(),i32(),i32(),i32(); bloblen=u64()
    offs=np.frombuffer(b,dtype='<u4',count=n+1,offset=p); p+=(n+1)*4
    scores=np.frombuffer(b,dtype='<f4',count=n,offset=p); p+=n*4
    blob=b[p:p+bloblen]; p+=bloblen
    pieces=[blob[offs[i]:offs[i+1]].decode('utf-8',errors='replace') for i in range(n)]
    n_norm=i32(); nm_bytes=u32(); nm=b[p:p+nm_bytes]; p+=nm_bytes
    norm={}; q=0
    for _ in range(n_norm):
        cp=struct.unpack_from('<I',nm,q)[0]; q+=4; no=nm[q]; q+=1
        outs=struct.unpack_from('<%dI'%no,nm,q); q+=4*no; norm[cp]=outs
    ndir=i32(); tensors={}
    for _ in range(ndir):
        nl=u16(); name=b[p:p+nl].decode(); p+=nl; dt=b[p]; p+=1; cnt=u32(); off=u64(); nbytes=u64()
        tensors[name]=(dt,cnt,off,nbytes)
    return dict(ver=ver,hp=hp,bos=bos,eos=eos,pad=pad,unk=unk,pieces=pieces,scores=np.array(scores),norm=norm,tensors=tensors,buf=b)
if __name__=="__main__":
    import sys
    m=parse(sys.argv[1])
    print(m['ver'],m['hp'],m['bos'],m['eos'],m['pad'],m['unk'],len(m['pieces']),m['pieces'][:8],m['scores'][:8])
    print(len(m['norm']), list(m['norm'].items())[:5])
    for k,v in list(m['tensors'].items())[:24]: print(k,v)
