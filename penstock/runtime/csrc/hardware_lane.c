/* The hardware JPEG decoders' lane: one thread that makes nvJPEG's batched hardware decode calls
   one after the other, never taking Python's interpreter lock.

   Made from a Python thread, each call returns with the batch decoded and must take the lock back
   before the next call can start; while other threads run Python that wait can last a switch
   interval (5 ms), and the engines idle (6-7% of the time in the training pipeline). Here the
   next batch's call starts as soon as the last one returns. Python describes each batch into a
   penstock_job (runtime/hardware_lane.py), submits it, and waits for it with a call that releases
   the lock. Every library call comes as a function pointer: nothing is linked at build time. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*context_set_t)(void *context);
typedef int (*event_query_t)(void *event);
typedef int (*event_synchronize_t)(void *event);
typedef int (*event_record_t)(void *event, void *stream);
typedef int (*initialize_t)(void *handle, void *state, int batch_size, int max_cpu_threads, int output_format);
typedef int (*decode_t)(void *handle, void *state, const void *data, const void *lengths, void *images,
                        const void *params, void *stream);

#define CUDA_ERROR_NOT_READY 600

/* One batch's decode; the same job (one per nvJPEG state) is submitted again for later batches. */
typedef struct {
    void *state, *data, *lengths, *images, *params, *stream;
    void *event;              /* recorded after the decode; waited for before the state's next one */
    int32_t count;            /* images in the batch */
    int32_t initialized_for;  /* the batch size the state is set up for (0: none) */
    int32_t status;           /* nvJPEG's status of the decode */
    int32_t cuda_status;      /* the first failed CUDA driver call's status, or 0 */
    int32_t done;             /* set when the decode call returned */
    int32_t reserved;
    double seconds;           /* the decode's time on the lane */
} penstock_job;

typedef struct {
    void *handle;             /* nvJPEG's */
    int32_t output_format;
    int32_t reserved;
    void *context;            /* the CUDA context the calls are made in */
    context_set_t context_set;
    event_query_t event_query;
    event_synchronize_t event_synchronize;
    event_record_t event_record;
    initialize_t initialize;
    decode_t decode;
} penstock_lane_calls;

#define CAPACITY 64

typedef struct {
    penstock_lane_calls calls;
    cpu_set_t cpus;
    int keep_cpus;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    penstock_job *queue[CAPACITY];
    uint64_t head, tail;      /* head: the next job to run; tail: where the next one goes */
    int stopping;
    int context_status;
} penstock_lane;

static double now(void) {
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return time.tv_sec + time.tv_nsec * 1e-9;
}

static void run_job(penstock_lane *lane, penstock_job *job) {
    const penstock_lane_calls *calls = &lane->calls;
    double started = now();
    int status = 0, cuda_status = lane->context_status;
    if (cuda_status == 0) {
        /* the state's buffers are free once its last decode has run on the GPU */
        int ready = calls->event_query(job->event);
        if (ready == CUDA_ERROR_NOT_READY)
            ready = calls->event_synchronize(job->event);
        cuda_status = ready;
    }
    if (cuda_status == 0) {
        if (job->initialized_for != job->count) {
            status = calls->initialize(calls->handle, job->state, job->count, 1, calls->output_format);
            job->initialized_for = status == 0 ? job->count : 0;
        }
        if (status == 0) {
            status = calls->decode(calls->handle, job->state, job->data, job->lengths, job->images, job->params,
                                   job->stream);
            if (status != 0)  /* set up again before the state's next batch */
                job->initialized_for = 0;
        }
        cuda_status = calls->event_record(job->event, job->stream);
    }
    job->status = status;
    job->cuda_status = cuda_status;
    job->seconds = now() - started;
}

static void *lane_loop(void *argument) {
    penstock_lane *lane = argument;
    if (lane->keep_cpus)
        sched_setaffinity(0, sizeof(cpu_set_t), &lane->cpus);  /* this thread's, on Linux */
    lane->context_status = lane->calls.context_set(lane->calls.context);
    for (;;) {
        pthread_mutex_lock(&lane->lock);
        while (lane->head == lane->tail && !lane->stopping)
            pthread_cond_wait(&lane->changed, &lane->lock);
        if (lane->head == lane->tail) {  /* stopping, every job submitted before has run */
            pthread_mutex_unlock(&lane->lock);
            return NULL;
        }
        penstock_job *job = lane->queue[lane->head % CAPACITY];
        pthread_mutex_unlock(&lane->lock);
        run_job(lane, job);
        pthread_mutex_lock(&lane->lock);
        lane->head++;
        job->done = 1;
        pthread_cond_broadcast(&lane->changed);
        pthread_mutex_unlock(&lane->lock);
    }
}

/* A lane running on ``cpus`` (``cpu_count`` of them; none: wherever the caller may run), in
   ``*opened``; 0, or -1 where its thread cannot be started. Every function here returns a status,
   as the libraries' functions do, so that Python loads them all alike. */
int32_t penstock_lane_open(const penstock_lane_calls *calls, const int32_t *cpus, int32_t cpu_count,
                           penstock_lane **opened) {
    penstock_lane *lane = calloc(1, sizeof(penstock_lane));
    *opened = NULL;
    if (lane == NULL)
        return -1;
    lane->calls = *calls;
    CPU_ZERO(&lane->cpus);
    for (int32_t index = 0; index < cpu_count; index++)
        if (cpus[index] >= 0 && cpus[index] < CPU_SETSIZE)
            CPU_SET(cpus[index], &lane->cpus);
    lane->keep_cpus = CPU_COUNT(&lane->cpus) > 0;
    pthread_mutex_init(&lane->lock, NULL);
    pthread_cond_init(&lane->changed, NULL);
    if (pthread_create(&lane->thread, NULL, lane_loop, lane) != 0) {
        pthread_cond_destroy(&lane->changed);
        pthread_mutex_destroy(&lane->lock);
        free(lane);
        return -1;
    }
    *opened = lane;
    return 0;
}

/* Queues the job's decode after those submitted before; 0, or -1 once the lane is stopping. */
int32_t penstock_lane_submit(penstock_lane *lane, penstock_job *job) {
    pthread_mutex_lock(&lane->lock);
    while (lane->tail - lane->head >= CAPACITY && !lane->stopping)
        pthread_cond_wait(&lane->changed, &lane->lock);
    if (lane->stopping) {
        pthread_mutex_unlock(&lane->lock);
        return -1;
    }
    job->done = 0;
    lane->queue[lane->tail % CAPACITY] = job;
    lane->tail++;
    pthread_cond_broadcast(&lane->changed);
    pthread_mutex_unlock(&lane->lock);
    return 0;
}

/* Returns once the job's decode call has returned (its status is then in the job). */
int32_t penstock_lane_wait(penstock_lane *lane, penstock_job *job) {
    pthread_mutex_lock(&lane->lock);
    while (!job->done)
        pthread_cond_wait(&lane->changed, &lane->lock);
    pthread_mutex_unlock(&lane->lock);
    return 0;
}

/* Runs the jobs already submitted, stops the lane's thread and frees the lane. */
int32_t penstock_lane_close(penstock_lane *lane) {
    pthread_mutex_lock(&lane->lock);
    lane->stopping = 1;
    pthread_cond_broadcast(&lane->changed);
    pthread_mutex_unlock(&lane->lock);
    pthread_join(lane->thread, NULL);
    pthread_cond_destroy(&lane->changed);
    pthread_mutex_destroy(&lane->lock);
    free(lane);
    return 0;
}
