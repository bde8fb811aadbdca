#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
static double cpu(int who){struct rusage r;getrusage(who,&r);return r.ru_utime.tv_sec*1e6+r.ru_utime.tv_usec+r.ru_stime.tv_sec*1e6+r.ru_stime.tv_usec;}
int main(int argc,char**argv){int n=200;int a=socket(AF_INET,SOCK_DGRAM,0),b=socket(AF_INET,SOCK_DGRAM,0);
struct sockaddr_in sa={.sin_family=AF_INET,.sin_addr.s_addr=htonl(0x7f000001)},sb=sa;sa.sin_port=htons(40001);sb.sin_port=htons(40002);
bind(a,(void*)&sa,sizeof sa);bind(b,(void*)&sb,sizeof sb);connect(a,(void*)&sb,sizeof sb);connect(b,(void*)&sa,sizeof sa);
char buf[64];pid_t p=fork();if(!p){for(int i=0;i<n;i++){recv(b,buf,64,0);send(b,buf,64,0);}_exit(0);}
double c0=cpu(RUSAGE_SELF);struct timespec ts={0,10000000};
for(int i=0;i<n;i++){send(a,buf,64,0);recv(a,buf,64,0);nanosleep(&ts,0);}
int st;waitpid(p,&st,0);double c1=cpu(RUSAGE_SELF)-c0+cpu(RUSAGE_CHILDREN);printf("udp blocking ping-pong, 10ms pauses: %.1f us CPU per rtt (pair)\n",c1/n);}
