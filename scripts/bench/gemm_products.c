/* The convolutions' own GEMM (Sources/Kernels/CLookoutKernels/gemm.c) against OpenBLAS on one core, on the products a
   detection of s makes: 36 Winograd products per layer (m = outputs, k = inputs, n = tiles), and single
   products of the lowered and 1×1 layers. Best of 15; the maximum difference between the two results.

   clang -O3 -I Sources/Kernels/CLookoutKernels/include scripts/bench/gemm_products.c Sources/Kernels/CLookoutKernels/gemm.c \
       -o /tmp/gemm_products -lopenblas -lm && /tmp/gemm_products */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <math.h>
#include <cblas.h>
#include "lookout_kernels.h"
static double now(){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  int shapes[][4]={{36,128,128,100},{36,64,64,400},{36,256,256,25},{36,128,256,100},{36,64,128,400},{36,32,32,1600},{36,128,512,25},{1,64,288,192},{1,128,576,192},{1,256,512,800},{1,512,1024,200},{1,64,64,3200},{36,64,512,25}};
  openblas_set_num_threads(1);
  for(int s=0;s<13;s++){
    int B=shapes[s][0],M=shapes[s][1],K=shapes[s][2],N=shapes[s][3];
    float*A=malloc(sizeof(float)*B*M*K),*Bm=malloc(sizeof(float)*B*K*N),*C=malloc(sizeof(float)*B*M*N),*C2=malloc(sizeof(float)*B*M*N);
    float*P=malloc(sizeof(float)*B*lookout_gemm_packed_count(M,K));
    for(long i=0;i<(long)B*M*K;i++)A[i]=rand()/(float)RAND_MAX-0.5f;
    for(long i=0;i<(long)B*K*N;i++)Bm[i]=rand()/(float)RAND_MAX-0.5f;
    for(int b=0;b<B;b++) lookout_gemm_pack(A+(long)b*M*K,M,K,K,P+b*lookout_gemm_packed_count(M,K));
    double best1=1e9,best2=1e9;
    for(int rep=0;rep<15;rep++){
      double t=now();
      for(int b=0;b<B;b++) cblas_sgemm(CblasRowMajor,CblasNoTrans,CblasNoTrans,M,N,K,1,A+(long)b*M*K,K,Bm+(long)b*K*N,N,0,C+(long)b*M*N,N);
      double t2=now();
      for(int b=0;b<B;b++) lookout_gemm(P+b*lookout_gemm_packed_count(M,K),M,K,Bm+(long)b*K*N,N,N,C2+(long)b*M*N,N,NULL,0);
      double t3=now();
      if(t2-t<best1)best1=t2-t; if(t3-t2<best2)best2=t3-t2;
    }
    double maxd=0; for(long i=0;i<(long)B*M*N;i++){double d=fabs(C[i]-C2[i]); if(d>maxd)maxd=d;}
    double fl=2.0*B*M*K*N;
    printf("%2dx %4d %4d %5d: openblas %7.0f us %5.1f GF/s | lookout %7.0f us %5.1f GF/s | maxdiff %.2e\n",B,M,K,N,best1*1e6,fl/best1/1e9,best2*1e6,fl/best2/1e9,maxd);
  }
}
